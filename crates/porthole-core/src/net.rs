//! Same-machine checks shared by the web surface and the `/mcp` guards: is a `Host`
//! header a loopback name, is an `Origin` a loopback origin (or one the user allowed).
//! These are what stop a web page on another site from reaching the bot through the
//! browser (cross-site requests and DNS rebinding).

/// `host[:port]` without the port, keeping IPv6 brackets. Anything that is not exactly
/// a host and an optional numeric port (`[::1].evil.example`, `[::1]x`) comes back
/// whole, so it matches no allowed name.
pub fn host_without_port(authority: &str) -> &str {
    let numeric = |port: &str| !port.is_empty() && port.chars().all(|c| c.is_ascii_digit());
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => match &authority[end + 1..] {
                "" => &authority[..=end],
                rest if rest.strip_prefix(':').is_some_and(numeric) => &authority[..=end],
                _ => authority,
            },
            None => authority,
        };
    }
    // Two colons or more without brackets: a bare IPv6 address (`::1`), which has no port.
    if authority.matches(':').nth(1).is_some() {
        return authority;
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if numeric(port) => host,
        _ => authority,
    }
}

/// The request's one header `name` (`Host`, `Origin`, `Authorization`), as text; a
/// value that is not text reads as empty, which no check accepts. Two of them are an
/// error: proxies and servers may each read a different one, which is how Host, Origin
/// and token checks get bypassed.
///
/// `name` is a `HeaderName` (`header::HOST`), not text: text would be parsed into one on
/// every lookup, and this runs several times per request.
pub fn single_header(
    headers: &axum::http::HeaderMap,
    name: axum::http::HeaderName,
) -> Result<Option<&str>, String> {
    let mut values = headers.get_all(&name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(format!(
            "send exactly one {} header",
            title_case(name.as_str())
        ));
    }
    Ok(first.map(|h| h.to_str().unwrap_or_default()))
}

/// A header name as people write it: `content-type` → `Content-Type`.
fn title_case(name: &str) -> String {
    let mut title = String::with_capacity(name.len());
    let mut word_start = true;
    for c in name.chars() {
        title.push(if word_start {
            c.to_ascii_uppercase()
        } else {
            c
        });
        word_start = c == '-';
    }
    title
}

/// Whether `host` names the loopback interface, in any letter case.
pub fn is_loopback_name(host: &str) -> bool {
    ["localhost", "127.0.0.1", "[::1]", "::1"]
        .iter()
        .any(|name| host.eq_ignore_ascii_case(name))
}

/// Whether a `Host` header names this machine, or a host in `allowed`.
pub fn host_is_allowed(host_header: &str, allowed: &[String]) -> bool {
    // Compared without case and without a lowered copy: this runs on every request.
    let name = host_without_port(host_header.trim());
    is_loopback_name(name) || allowed.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Whether an `Origin` header is a loopback origin (http or https, any port) or one of
/// `allowed` exactly.
pub fn origin_is_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim();
    if allowed.iter().any(|o| o == origin) {
        return true;
    }
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    matches!(authority, Some(a) if !a.contains('/')
        && is_loopback_name(host_without_port(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_header_is_refused_by_its_written_name() {
        use axum::http::{HeaderMap, HeaderValue, header};
        let mut headers = HeaderMap::new();
        assert_eq!(single_header(&headers, header::HOST), Ok(None));
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        assert_eq!(single_header(&headers, header::HOST), Ok(Some("localhost")));
        headers.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert_eq!(
            single_header(&headers, header::HOST),
            Err("send exactly one Host header".to_string())
        );
        assert_eq!(title_case("proxy-authorization"), "Proxy-Authorization");
    }

    #[test]
    fn hosts_and_origins() {
        let hosts = vec!["devbox".to_string()];
        for ok in [
            "127.0.0.1:3000",
            "localhost",
            "[::1]:8080",
            "::1",
            "LOCALHOST:1",
            "devbox:3000",
        ] {
            assert!(host_is_allowed(ok, &hosts), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "127.0.0.1.evil.com:80",
            "10.0.0.1:3000",
            "[::1].evil.example",
            "[::1].evil.example:80",
            "[::1]x",
            "[::1]:",
            "localhost:",
            "localhost:80:80",
            "::1:3000",
            "::2",
        ] {
            assert!(!host_is_allowed(bad, &hosts), "{bad}");
        }
        let origins = vec!["https://tools.example".to_string()];
        for ok in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "https://tools.example",
        ] {
            assert!(origin_is_allowed(ok, &origins), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "null",
            "http://localhost.evil.com",
            "http://[::1].evil.example",
            "http://[::1].evil.example:3000",
            "file://",
        ] {
            assert!(!origin_is_allowed(bad, &origins), "{bad}");
        }
    }
}
