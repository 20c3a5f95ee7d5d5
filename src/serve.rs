//! The HTTP server loop: what `axum::serve` does, plus the limits it lacks.
//!
//! Without limits, a thousand clients that open connections and send their headers
//! slowly (or never) hold every file descriptor, and then nothing, `/mcp` included, can
//! be reached. So:
//! - **header timeout**: a request's headers must arrive in full within
//!   `HTTP_HEADER_TIMEOUT_SECS` of the server starting to wait for them. The wait also
//!   starts after each response, so it closes idle keep-alive connections too. HTTP/2
//!   connections are pinged at that pace instead, and closed when a ping goes
//!   unanswered. Bodies (see `MCP_BODY_TIMEOUT_SECS`) and responses, SSE streams
//!   included, are not limited.
//! - **connection cap**: at most `HTTP_MAX_CONNECTIONS` at once, lowered to fit the
//!   process's open-file limit; a WebSocket keeps its connection's place while open
//!   ([`ConnectionPlace`]). When a connection arrives at the cap, the one that has waited
//!   longest for its first request's headers is closed to make room, so a flood of
//!   clients that trickle their headers cannot keep a well-behaved request waiting;
//!   connections that have sent a request (being answered, streaming, or idle between
//!   keep-alive requests) are never closed for this. When every connection has sent one,
//!   the new connection waits, unserved, until one closes (and those after it in the
//!   kernel's queue). A warning says so once per burst.
//! - `TCP_NODELAY` on every connection: small SSE frames otherwise stall on Nagle's
//!   algorithm plus delayed ACKs.
//! - graceful shutdown: when `stop` resolves, accepting stops and open connections are
//!   asked to finish; the future resolves once they all have.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tower::ServiceExt;

/// The limits the server loop enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// File descriptors kept free beyond the connections: the database, the log file, user
/// tools' pipes, MCP servers the bot uses.
const RESERVED_DESCRIPTORS: u64 = 128;

/// `wanted`, lowered so that the connections fit in the open-file limit.
fn connection_cap(wanted: usize) -> usize {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            let fits = limit.rlim_cur.saturating_sub(RESERVED_DESCRIPTORS).max(16);
            if (wanted as u64) > fits {
                tracing::warn!(
                    wanted,
                    open_file_limit = limit.rlim_cur,
                    cap = fits,
                    "HTTP_MAX_CONNECTIONS is above what the open-file limit allows; raise `ulimit -n` to serve more"
                );
                return fits as usize;
            }
        }
    }
    wanted
}

/// Raises this process's soft open-file limit to its hard limit, so the connection cap
/// is not set by a low default (1024 on many systems).
pub fn raise_open_file_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: both calls only read and write the struct we pass.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}

/// The connections still waiting for their first request's headers, each with the
/// sender that closes it. Keys are handed out in accept order, so the first key is the
/// connection that has waited longest.
#[derive(Default)]
struct AwaitingHeaders {
    next_key: u64,
    closers: BTreeMap<u64, oneshot::Sender<()>>,
}

impl AwaitingHeaders {
    /// Registers a connection just accepted; its key and the signal that closes it.
    fn register(this: &Mutex<Self>) -> (u64, oneshot::Receiver<()>) {
        let (closer, closed) = oneshot::channel();
        let mut this = this.lock().unwrap_or_else(|e| e.into_inner());
        let key = this.next_key;
        this.next_key += 1;
        this.closers.insert(key, closer);
        (key, closed)
    }

    /// The connection `key` has sent its headers (or ended): it is no longer a candidate.
    fn settled(this: &Mutex<Self>, key: u64) {
        this.lock()
            .unwrap_or_else(|e| e.into_inner())
            .closers
            .remove(&key);
    }

    /// Closes the connection that has waited longest for its headers; false when none is
    /// waiting.
    fn close_oldest(this: &Mutex<Self>) -> bool {
        let oldest = this
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closers
            .pop_first();
        oldest.is_some_and(|(_, closer)| closer.send(()).is_ok())
    }
}

/// HTTP/1 and HTTP/2 connections, with the header timeout. An HTTP/2 connection has no
/// headers to wait for between its requests, so it is pinged every `header_timeout`
/// instead, and closed when a ping goes unanswered that long: a peer that opens
/// connections, sends one request each and stops reading cannot hold them (and the
/// connection cap) for good.
fn connection_builder(header_timeout: Duration) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    // WebSockets over HTTP/2 need the extended CONNECT protocol.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(header_timeout)
        .keep_alive_timeout(header_timeout)
        .enable_connect_protocol();
    builder
}

/// Serves `router` on `listener` until `stop` resolves and every connection has closed.
/// Handlers see the peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let cap = connection_cap(limits.max_connections);
    let permits = Arc::new(Semaphore::new(cap));
    let graceful = GracefulShutdown::new();
    let builder = Arc::new(connection_builder(limits.header_timeout));
    let awaiting = Arc::new(Mutex::new(AwaitingHeaders::default()));
    let mut stop = std::pin::pin!(stop);
    let mut warned_at_cap = false;
    loop {
        // A connection first, then its place: at the cap, a connection that waits for
        // its headers is closed only when another has arrived to take its place (and
        // never the one that just arrived).
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before accept: wait a
                    // little rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                warned_at_cap = false;
                permit
            }
            Err(_) => {
                if !warned_at_cap {
                    tracing::warn!(
                        cap,
                        "connection cap reached (HTTP_MAX_CONNECTIONS); closing the connections that wait longest for their headers, or else new ones wait until one closes"
                    );
                    warned_at_cap = true;
                }
                // The closed connection's task gives its permit back at once.
                AwaitingHeaders::close_oldest(&awaiting);
                tokio::select! {
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    _ = &mut stop => break,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        serve_connection(tcp, peer, permit, &router, &builder, &graceful, &awaiting);
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A connection's place under `HTTP_MAX_CONNECTIONS`, in the extensions of a request
/// that may take the connection over ([`takes_the_connection_over`]). A WebSocket keeps
/// it for as long as it is open: the connection's own task ends at the upgrade, and the
/// place must not be given back while the socket is open.
#[derive(Clone)]
pub struct ConnectionPlace {
    _permit: Arc<OwnedSemaphorePermit>,
}

/// Whether `request` asks to take its connection over: an HTTP/1 `Upgrade`, or HTTP/2's
/// extended `CONNECT` (how a WebSocket starts on each).
fn takes_the_connection_over<B>(request: &hyper::Request<B>) -> bool {
    request.headers().contains_key(hyper::header::UPGRADE)
        || request.method() == hyper::Method::CONNECT
}

/// Serves one accepted connection in a task of its own, which holds `permit` until the
/// connection ends or is closed at the cap while waiting for its headers (and a
/// WebSocket made of it, until the socket closes: [`ConnectionPlace`]).
fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    router: &Router,
    builder: &auto::Builder<TokioExecutor>,
    graceful: &GracefulShutdown,
    awaiting: &Arc<Mutex<AwaitingHeaders>>,
) {
    let (key, closed) = AwaitingHeaders::register(awaiting);
    let on_request = awaiting.clone();
    let place = ConnectionPlace {
        _permit: Arc::new(permit),
    };
    let held = place.clone();
    let service = router
        .clone()
        .map_request(move |mut request: hyper::Request<Incoming>| {
            AwaitingHeaders::settled(&on_request, key);
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            // Only a request that may take the connection over needs its place: the
            // others answer while the connection's own task holds it.
            if takes_the_connection_over(&request) {
                request.extensions_mut().insert(held.clone());
            }
            request.map(Body::new)
        });
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(service))
        .into_owned();
    let connection = graceful.watch(connection);
    let on_end = awaiting.clone();
    tokio::spawn(async move {
        tokio::select! {
            ended = connection => if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            },
            Ok(()) = closed => {
                tracing::debug!(%peer, "closed at the connection cap while waiting for its headers");
            }
        }
        AwaitingHeaders::settled(&on_end, key);
        drop(place);
    });
}
