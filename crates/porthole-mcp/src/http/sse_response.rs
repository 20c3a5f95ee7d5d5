//! SSE responses: the body stream with keep-alive comments that ends when the server
//! shuts down, and how a message becomes an event.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::ServerInner;

/// Aborts a task when dropped: ties a handler's life to its HTTP response.
pub(super) struct AbortOnDrop(pub(super) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An SSE response body fed by a channel, with keep-alive comments.
pub(super) struct SseBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
    keepalive: tokio::time::Interval,
    /// Resolves when the server shuts down: the stream ends so shutdown is not held up.
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The task feeding the stream, if any: it stops when the client goes away.
    _feeder: Option<AbortOnDrop>,
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(bytes)) => return Poll::Ready(Some(Ok(bytes))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if self.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        if self.keepalive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
        }
        Poll::Pending
    }
}

/// An SSE response carrying what arrives on `rx`, with keep-alives, ended by server
/// shutdown; `feeder` is the task that feeds `rx`, aborted when the response is dropped.
pub(super) fn sse_response(
    inner: &ServerInner,
    rx: mpsc::UnboundedReceiver<Bytes>,
    feeder: Option<tokio::task::AbortHandle>,
) -> Response {
    let mut stopping = inner.shutdown.subscribe();
    let body = SseBody {
        rx,
        keepalive: keepalive(inner.limits.keepalive),
        stop: Box::pin(async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        }),
        _feeder: feeder.map(AbortOnDrop),
    };
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

pub(super) fn keepalive(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// One plain (modern) SSE event.
pub(super) fn sse_event(message: &Value) -> Bytes {
    sse_frame(|event| {
        let _ = serde_json::to_writer(event, message);
    })
}

/// One plain (modern) SSE event carrying `message`, a JSON-RPC message's text.
pub(super) fn sse_data(message: &[u8]) -> Bytes {
    sse_frame(|event| event.extend_from_slice(message))
}

/// An SSE `message` event whose data `write_data` appends.
fn sse_frame(write_data: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut event = b"event: message\ndata: ".to_vec();
    write_data(&mut event);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}
