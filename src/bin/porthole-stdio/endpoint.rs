//! Where the relay sends: the `/mcp` URL from `PORTHOLE_URL` (or the design documents'
//! `OLLIEBOT_URL`), the token's variable, and an HTTP client that never sends a loopback
//! request through a proxy.

use super::log;

/// A setting by its name, or by the name the design documents give it (`OLLIEBOT_URL`,
/// `OLLIEBOT_TOKEN`, for a configuration copied from them): the value, and the name it
/// was found under, for messages. An empty value counts as unset.
pub(crate) fn setting(
    name: &'static str,
    design_name: &'static str,
) -> Option<(String, &'static str)> {
    [name, design_name].into_iter().find_map(|n| {
        std::env::var(n)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (v, n))
    })
}

/// The `/mcp` endpoint for `PORTHOLE_URL` (`name`: the variable it came from): a base
/// URL gets `/mcp` appended, a URL that already ends in `/mcp` is kept. The error says
/// what to set.
pub(crate) fn endpoint_url(text: &str, name: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(text.trim()).map_err(|e| {
        format!("{name}=\"{text}\" is not a URL ({e}); use e.g. http://127.0.0.1:3000")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{name}=\"{text}\" must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:3000"
        ));
    }
    let path = url.path().trim_end_matches('/').to_string();
    if path.ends_with("/mcp") {
        url.set_path(&path);
    } else {
        url.set_path(&format!("{path}/mcp"));
    }
    Ok(url)
}

/// Whether `url` points at this machine: `localhost`, `127.0.0.0/8`, `::1`, their
/// IPv4-mapped forms, `0.0.0.0` and `::` (which reach this machine too), or a name
/// that resolves to those addresses only (this machine's own host name, a name in
/// `MCP_ALLOWED_HOSTS`).
fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return is_this_machine(ip);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let port = url.port_or_known_default().unwrap_or(80);
    std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port)).is_ok_and(|addresses| {
        let mut addresses = addresses.peekable();
        addresses.peek().is_some() && addresses.all(|a| is_this_machine(a.ip()))
    })
}

fn is_this_machine(ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || ip.is_unspecified()
}

/// The HTTP client: never through a proxy for a loopback URL (the bearer token would
/// travel to the proxy); other URLs follow the usual proxy variables.
pub(crate) fn http_client(url: &reqwest::Url) -> reqwest::Client {
    let builder = porthole::http_client::builder();
    let builder = if is_loopback(url) {
        builder.no_proxy()
    } else {
        builder
    };
    builder.build().unwrap_or_else(|e| {
        log(&format!(
            "cannot build the HTTP client with the proxy settings ({e}); going direct"
        ));
        porthole::http_client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_and_full_urls_name_the_same_endpoint() {
        for (given, expected) in [
            ("http://127.0.0.1:3000", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/mcp/", "http://127.0.0.1:3000/mcp"),
            (
                "https://bot.example/porthole",
                "https://bot.example/porthole/mcp",
            ),
        ] {
            assert_eq!(
                endpoint_url(given, "PORTHOLE_URL").unwrap().as_str(),
                expected,
                "{given}"
            );
        }
        assert!(endpoint_url("127.0.0.1:3000", "PORTHOLE_URL").is_err());
        assert!(
            endpoint_url("ftp://127.0.0.1/", "PORTHOLE_URL")
                .unwrap_err()
                .contains("http://")
        );
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for url in [
            "http://127.0.0.1:1",
            "http://127.9.9.9",
            "http://[::1]:3",
            "http://LOCALHOST:3000",
            "http://[::ffff:127.0.0.1]:3000",
            "http://0.0.0.0:3000",
            "http://[::]:3000",
        ] {
            assert!(is_loopback(&reqwest::Url::parse(url).unwrap()), "{url}");
        }
        for url in ["http://10.0.0.1", "http://example.com", "http://[::2]"] {
            assert!(!is_loopback(&reqwest::Url::parse(url).unwrap()), "{url}");
        }
    }
}
