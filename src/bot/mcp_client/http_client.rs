//! What both HTTP transports (`http.rs`, `http_sse.rs`) need before and around their
//! requests: the checked URL, configured headers and client of one server, a transport
//! failure in words, and URLs with their credentials removed for messages admins see.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::jsonrpc::CallError;

/// The checked URL, the HTTP client and the configured headers of one server entry.
pub(super) fn http_setup(
    url: &str,
    headers: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(reqwest::Client, reqwest::Url, HeaderMap), String> {
    let url = reqwest::Url::parse(url).map_err(|e| format!("invalid url: {e}"))?;
    let headers = header_map(headers)?;
    let client = http_client(timeout)?;
    Ok((client, url, headers))
}

/// The configured headers of a server entry, checked.
fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("invalid header `{name}`: {e}"))?;
        let value =
            HeaderValue::from_str(value).map_err(|e| format!("invalid header value: {e}"))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// The HTTP client of one server connection.
fn http_client(connect_timeout: Duration) -> Result<reqwest::Client, String> {
    crate::http_client::builder()
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A transport failure as a lost connection, with the underlying cause spelled out.
pub(super) fn transport_error(error: &reqwest::Error) -> CallError {
    let mut text = crate::text::with_causes(error);
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), &redacted(url));
    }
    CallError::Lost(text)
}

/// A URL without credentials, query or fragment, for messages that admins see.
pub(super) fn redacted(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}
