//! The HTTP client every outbound call of the bot is built from: the LLM provider,
//! remote MCP servers and the OTLP collector. It follows no redirect.
//!
//! Each of those calls carries credentials given for one host: a provider's
//! `x-api-key`, an MCP server's headers, the collector's headers. On a redirect to
//! another host reqwest drops only `Authorization`, `Cookie` and `Proxy-Authorization`,
//! so following it would hand the rest to whatever host the first one names. A
//! redirect therefore comes back as the answer, and the caller's error says to point
//! the setting at where it leads.

/// A client builder that follows no redirect; add timeouts as the caller needs.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none())
}
