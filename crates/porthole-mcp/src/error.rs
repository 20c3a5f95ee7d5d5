//! Why a server cannot be set up from what it was given: the error of
//! [`McpServerBuilder::build`](crate::McpServerBuilder::build) and of the tool and
//! prompt sets it builds, each naming what to fix.

/// A tool or prompt the server cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A tool whose name, description or input schema the protocol cannot serve.
    #[error("tool `{name}`: {reason}")]
    Tool {
        /// The tool's name, as its spec gives it.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A prompt without a description.
    #[error("prompt `{name}` needs a description")]
    PromptWithoutDescription {
        /// The prompt's name.
        name: String,
    },
    /// Two tools, or two prompts, share a name.
    #[error("two {kind}s are named `{name}`")]
    Duplicate {
        /// `tool` or `prompt`.
        kind: &'static str,
        /// The name they share.
        name: String,
    },
}
