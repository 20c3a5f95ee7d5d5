//! A configuration value that could not be used, and how it is shown: start-up's
//! exit message names the variable and what is allowed, never the secret it may hold.

/// A configuration value that could not be used. It is shown (start-up's exit message)
/// without what it may hold of a secret: the whole value of a variable named like one,
/// and otherwise a URL's password and anything shaped like a secret
/// (`host=… password=…`, `https://user:pass@…`).
#[derive(thiserror::Error)]
#[error("{variable}={:?} is not valid: {allowed}", self.shown_value())]
pub struct ConfigError {
    pub variable: &'static str,
    pub value: String,
    pub allowed: String,
}

impl ConfigError {
    fn shown_value(&self) -> String {
        if crate::redact::is_secret_key(self.variable) {
            return crate::redact::REDACTED.to_string();
        }
        let without_password = crate::redact::redact_url(&self.value);
        crate::redact::Redactor::default()
            .redact_text(&without_password)
            .into_owned()
    }
}

impl std::fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigError")
            .field("variable", &self.variable)
            .field("value", &self.shown_value())
            .field("allowed", &self.allowed)
            .finish()
    }
}
