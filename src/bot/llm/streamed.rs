//! What the two remote providers (`anthropic.rs`, `openai.rs`) share: one chat is a
//! POST whose answer streams back as server-sent events, each event adding text, a
//! tool-call fragment, the finish reason or token counts to a [`StreamedReply`]. A
//! provider is a [`WireFormat`] — how it writes a request and reads an event — and
//! gets [`LlmProvider`] from that.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    ChatRequest, ChatResponse, Endpoint, LlmError, LlmProvider, TokenSink, ToolNames, Usage,
    parse_arguments, sse_reader,
};
use crate::model::ToolCall;

/// How one streaming chat API writes its requests and reads its events.
pub(super) trait WireFormat: Send + Sync {
    /// The name reported as [`LlmProvider::provider`].
    const PROVIDER: &'static str;

    fn endpoint(&self) -> &Endpoint;

    /// The parameters the provider sends when the request brings none: the model and
    /// what the API requires besides.
    fn default_parameters(&self) -> Map<String, Value>;

    /// The stream settings, always the provider's own (it reads the answer as a stream).
    fn stream_parameters(&self) -> Value;

    /// The request body beside its parameters ([`LlmProvider::parameters`]): the
    /// messages, system prompt and tools of `request`, tools named by their wire names.
    fn content(&self, request: &ChatRequest<'_>, names: &ToolNames) -> Map<String, Value>;

    /// POSTs `body` with the provider's headers and its way of sending the key.
    fn post(
        &self,
        body: &Value,
    ) -> impl Future<Output = Result<reqwest::Response, LlmError>> + Send;

    /// Adds one streamed event (its data) to `reply`; `false` ends the stream.
    fn on_event(&self, data: &str, reply: &mut StreamedReply<'_>) -> Result<bool, LlmError>;

    /// The id a finished tool call gets; by default the one the stream gave.
    fn call_id(&self, streamed: String) -> String {
        streamed
    }
}

#[async_trait]
impl<F: WireFormat> LlmProvider for F {
    fn provider(&self) -> &str {
        F::PROVIDER
    }

    fn model(&self) -> &str {
        &self.endpoint().model
    }

    fn parameters(&self, request: &ChatRequest<'_>) -> Map<String, Value> {
        let mut parameters = request
            .parameters
            .cloned()
            .unwrap_or_else(|| self.default_parameters());
        if let Value::Object(stream) = self.stream_parameters() {
            parameters.extend(stream);
        }
        parameters
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_token: TokenSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let names = request.tool_names();
        let mut body = LlmProvider::parameters(self, request);
        body.extend(self.content(request, &names));
        let response = self.post(&Value::Object(body)).await?;
        let mut reply = StreamedReply::new(on_token);
        sse_reader::for_each_event(response, self.endpoint().timeout_secs, |data| {
            self.on_event(data, &mut reply)
        })
        .await?;
        reply.finish(&names, |id| self.call_id(id))
    }
}

/// A tool call being assembled from streamed fragments.
#[derive(Default)]
pub(super) struct PartialCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A reply as it streams in.
pub(super) struct StreamedReply<'a> {
    on_token: TokenSink<'a>,
    content: String,
    /// By the index the stream gives each call.
    pub calls: BTreeMap<u64, PartialCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

impl<'a> StreamedReply<'a> {
    fn new(on_token: TokenSink<'a>) -> Self {
        StreamedReply {
            on_token,
            content: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    /// Text of the answer: shown to the user as it comes, and kept.
    pub fn push_text(&mut self, text: &str) {
        (self.on_token)(text);
        self.content.push_str(text);
    }

    /// The response, tool calls in stream order with their arguments parsed and
    /// their original names restored.
    fn finish(
        self,
        names: &ToolNames,
        call_id: impl Fn(String) -> String,
    ) -> Result<ChatResponse, LlmError> {
        let tool_calls = self
            .calls
            .into_values()
            .map(|c| {
                let arguments = parse_arguments(&c.arguments, &c.name)?;
                Ok(ToolCall {
                    id: call_id(c.id),
                    name: names.original(&c.name),
                    arguments,
                })
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        Ok(ChatResponse {
            content: self.content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}
