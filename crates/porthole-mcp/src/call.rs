//! How one request's handler runs.
//!
//! A handler runs inline, inside the HTTP request's own task: most calls answer without
//! sending anything first, and a task plus a channel hop per request cost more than many
//! handlers do. When a handler does send a message before its result (progress, a log
//! line, a server→client request), the reply becomes an SSE stream and the handler moves
//! to a task of its own, so it keeps running while the stream is fed.
//!
//! A panic in a handler is caught: it becomes an error reply for that request only.
//!
//! What happens when the HTTP request goes away while the handler still runs inline is
//! the call's [`Lifetime`]: in the modern era closing the connection cancels the work;
//! in the legacy era a disconnection is not a cancellation, so the handler finishes in
//! the background unless `notifications/cancelled` stops it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::{AbortRegistration, Abortable};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::ServerInner;
use super::context::{RequestContext, StreamEvent};
use super::jsonrpc::RpcError;
use super::methods::{self, MethodResult, Work};
use super::session::{Session, Tracked};

/// Why a handler produced no result.
#[derive(Debug)]
pub(crate) enum Unfinished {
    Panicked,
    Cancelled,
}

/// A handler's end: its result, or why there is none.
pub(crate) type Finished = Result<Result<MethodResult, RpcError>, Unfinished>;

/// What becomes of a call whose HTTP request goes away.
pub(crate) enum Lifetime {
    /// Modern era: the work stops with the request.
    EndsWithRequest,
    /// Legacy era: the work runs to its end unless the session cancels it; `tracked`
    /// keeps the request cancellable until then.
    Detached {
        cancel: AbortRegistration,
        tracked: Tracked,
    },
}

impl Lifetime {
    /// A legacy request of `session`: cancellable through the session until it ends.
    pub(crate) fn in_session(session: &Arc<Session>, request_id: &Value) -> Lifetime {
        let (tracked, cancel) = session.track(request_id);
        Lifetime::Detached { cancel, tracked }
    }
}

type Handler = Pin<Box<dyn Future<Output = Finished> + Send>>;

/// A started request: run it with [`Call::run`].
pub(crate) struct Call {
    handler: InlineHandler,
    /// What the handler sends before its result; `None` when it can send nothing.
    events: Option<mpsc::UnboundedReceiver<StreamEvent>>,
}

/// How far a call got without a task of its own.
pub(crate) enum Progress {
    /// The handler returned without sending anything first.
    Done(Finished),
    /// The handler sent a message before its result.
    Streaming(Streaming),
}

/// A handler that sent `first` before its result: the rest of its messages arrive
/// through `events`, and `rest` (its own task now) resolves to the result.
pub(crate) struct Streaming {
    first: StreamEvent,
    events: mpsc::UnboundedReceiver<StreamEvent>,
    rest: JoinHandle<Finished>,
}

impl Streaming {
    /// Stops the handler's task (the client went away).
    pub(crate) fn abort_handle(&self) -> tokio::task::AbortHandle {
        self.rest.abort_handle()
    }

    /// Hands every message the handler sends to `each`, in order, then waits for its
    /// result; a task aborted from outside counts as cancelled.
    pub(crate) async fn pump(self, mut each: impl FnMut(StreamEvent)) -> Finished {
        let Streaming {
            first,
            mut events,
            rest,
        } = self;
        each(first);
        while let Some(event) = events.recv().await {
            each(event);
        }
        rest.await.unwrap_or(Err(Unfinished::Cancelled))
    }
}

impl Call {
    /// Prepares `work` for `ctx`. With `streams`, the handler may send messages before
    /// its result; without, they are dropped and only the result counts.
    pub(crate) fn new(
        inner: Arc<ServerInner>,
        work: Work,
        mut ctx: RequestContext,
        streams: bool,
        lifetime: Lifetime,
    ) -> Call {
        // The channel (two allocations) only for a handler that could use it.
        let events = (streams && ctx.may_send()).then(|| {
            let (outbound, events) = mpsc::unbounded_channel();
            ctx.outbound = Some(outbound);
            events
        });
        let dispatch = AssertUnwindSafe(async move { methods::run(&inner, work, &ctx).await })
            .catch_unwind()
            .map(|result| result.map_err(|_| Unfinished::Panicked));
        let (handler, finish_on_drop): (Handler, bool) = match lifetime {
            Lifetime::EndsWithRequest => (Box::pin(dispatch), false),
            Lifetime::Detached { cancel, tracked } => (
                Box::pin(Abortable::new(dispatch, cancel).map(move |result| {
                    drop(tracked);
                    result.unwrap_or(Err(Unfinished::Cancelled))
                })),
                true,
            ),
        };
        Call {
            handler: InlineHandler {
                handler: Some(handler),
                finish_on_drop,
            },
            events,
        }
    }

    /// Runs the handler until it returns or sends its first message.
    pub(crate) async fn run(mut self) -> Progress {
        enum Next {
            Returned(Finished),
            Sent(StreamEvent),
        }
        let next = {
            let handler = self.handler.handler.as_mut().expect("a call runs once");
            tokio::select! {
                biased;
                result = handler => Next::Returned(result),
                Some(event) = next_event(&mut self.events) => Next::Sent(event),
            }
        };
        match next {
            Next::Returned(result) => {
                self.handler.handler = None;
                let first = self.events.as_mut().map(|events| events.try_recv());
                match (first, self.events) {
                    // Messages sent in the very poll that returned still go first.
                    (Some(Ok(first)), Some(events)) => Progress::Streaming(Streaming {
                        first,
                        events,
                        rest: tokio::spawn(std::future::ready(result)),
                    }),
                    _ => Progress::Done(result),
                }
            }
            Next::Sent(first) => {
                let handler = self.handler.handler.take().expect("not yet taken");
                Progress::Streaming(Streaming {
                    first,
                    events: self.events.expect("an event came through it"),
                    rest: tokio::spawn(handler),
                })
            }
        }
    }
}

/// The next message on `events`; `None` at once when there is no channel.
async fn next_event(
    events: &mut Option<mpsc::UnboundedReceiver<StreamEvent>>,
) -> Option<StreamEvent> {
    events.as_mut()?.recv().await
}

/// The handler while it runs inline; on drop, it finishes in a task if its lifetime
/// says so.
struct InlineHandler {
    handler: Option<Handler>,
    finish_on_drop: bool,
}

impl Drop for InlineHandler {
    fn drop(&mut self) {
        if let Some(handler) = self.handler.take()
            && self.finish_on_drop
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(handler);
        }
    }
}
