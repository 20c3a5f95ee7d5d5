//! Start-up wiring: configuration → services → router → serve, and a clean shutdown.
//! `main` calls [`start`]; integration tests call it too, on port 0.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::sync::watch;

use crate::bot::{Bot, TracingWebLogSink, WebLogSink};
use crate::config::Config;

/// A bot that is serving. Dropping it does not stop it; call [`RunningApp::shutdown`].
pub struct RunningApp {
    pub addr: SocketAddr,
    pub bot: Arc<Bot>,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    scheduler: Option<tokio::task::JoinHandle<()>>,
}

impl RunningApp {
    /// The base URL, e.g. `http://127.0.0.1:3000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections, lets in-flight requests finish, stops the scheduler.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        if let Some(s) = self.scheduler {
            let _ = s.await;
        }
    }

    /// Resolves when a shutdown was requested and everything stopped.
    pub async fn wait(self) {
        let _ = self.server.await;
        if let Some(s) = self.scheduler {
            let _ = s.await;
        }
    }

    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown.clone()
    }
}

/// Builds every service and starts serving on `config.host:config.port`.
pub async fn start(config: Config) -> anyhow::Result<RunningApp> {
    let sink: Arc<dyn WebLogSink> = Arc::new(TracingWebLogSink);
    let bot = Bot::build(config, sink)?;
    let router = crate::bot::web::router(bot.clone());

    let bind = SocketAddr::new(bot.config.host, bot.config.port);
    let listener = tokio::net::TcpListener::bind(bind).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {bind}: {e}; set PORT to a free port (or HOST)")
    })?;
    let addr = listener.local_addr()?;
    tracing::info!("listening on http://{addr}");

    let (shutdown, shutdown_rx) = watch::channel(false);
    let scheduler = bot
        .config
        .scheduler_enabled
        .then(|| tokio::spawn(bot.tasks.clone().run_scheduler(shutdown_rx.clone())));
    let mut server_shutdown = shutdown_rx;
    // Without TCP_NODELAY, small SSE frames stall on Nagle plus delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move {
        let serve = axum::serve(listener, service).with_graceful_shutdown(async move {
            let _ = server_shutdown.wait_for(|stop| *stop).await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "server stopped with an error");
        }
    });
    Ok(RunningApp {
        addr,
        bot,
        shutdown,
        server,
        scheduler,
    })
}
