//! The HTTP server loop: what `axum::serve` does, plus the limits it lacks.
//!
//! Without limits, a thousand clients that open connections and send their headers
//! slowly (or never) hold every file descriptor, and then nothing, `/mcp` included, can
//! be reached. So:
//! - **header timeout**: a request's headers must arrive in full within
//!   `HTTP_HEADER_TIMEOUT_SECS` of the server starting to wait for them. The wait also
//!   starts after each response, so it closes idle keep-alive connections too. Bodies
//!   (see `MCP_BODY_TIMEOUT_SECS`) and responses, SSE streams included, are not limited.
//! - **connection cap**: at most `HTTP_MAX_CONNECTIONS` at once, lowered to fit the
//!   process's open-file limit. At the cap new connections wait in the kernel's queue
//!   until one closes, and a warning says so once per burst.
//! - `TCP_NODELAY` on every connection: small SSE frames otherwise stall on Nagle's
//!   algorithm plus delayed ACKs.
//! - graceful shutdown: when `stop` resolves, accepting stops and open connections are
//!   asked to finish; the future resolves once they all have.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
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

/// HTTP/1 and HTTP/2 connections, with the header timeout.
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
    let mut stop = std::pin::pin!(stop);
    let mut warned_at_cap = false;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                warned_at_cap = false;
                permit
            }
            Err(_) => {
                if !warned_at_cap {
                    tracing::warn!(
                        cap,
                        "connection cap reached (HTTP_MAX_CONNECTIONS); new connections wait until one closes"
                    );
                    warned_at_cap = true;
                }
                tokio::select! {
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    _ = &mut stop => break,
                }
            }
        };
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
        let _ = tcp.set_nodelay(true);
        let service = router
            .clone()
            .map_request(move |mut request: hyper::Request<Incoming>| {
                request
                    .extensions_mut()
                    .insert(ConnectInfo::<SocketAddr>(peer));
                request.map(Body::new)
            });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(service))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
