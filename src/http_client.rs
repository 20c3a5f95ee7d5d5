//! The HTTP client every outbound call of the bot is built from: the LLM provider,
//! remote MCP servers and the OTLP collector. It follows no redirect.
//!
//! Each of those calls carries credentials given for one host: a provider's
//! `x-api-key`, an MCP server's headers, the collector's headers. On a redirect to
//! another host reqwest drops only `Authorization`, `Cookie` and `Proxy-Authorization`,
//! so following it would hand the rest to whatever host the first one names. A
//! redirect therefore comes back as the answer, and the caller's error says to point
//! the setting at where it leads.

/// The most of a refusal's body the bot reads: enough for any error message, and a
/// server that answers an error with gigabytes costs no more memory than this.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// The body of an answer with an error status, as text, read no further than
/// [`MAX_ERROR_BODY`] (and whatever part arrived when reading fails).
pub async fn error_body(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ERROR_BODY - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() == MAX_ERROR_BODY {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A client builder that follows no redirect; add timeouts as the caller needs.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that refuses with megabytes of body costs the bot only the cap.
    #[tokio::test]
    async fn an_error_body_is_read_no_further_than_the_cap() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let body = "e".repeat(4 * 1024 * 1024);
            let head = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        });
        let client = builder().no_proxy().build().unwrap();
        let response = client
            .get(format!("http://{address}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 500);
        let body = error_body(response).await;
        assert_eq!(body.len(), MAX_ERROR_BODY);
        assert!(body.bytes().all(|b| b == b'e'));
    }
}
