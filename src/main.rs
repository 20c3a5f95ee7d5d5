//! The `porthole` binary: reads configuration, sets up logging, runs the bot until
//! Ctrl-C or SIGTERM.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = match porthole::config::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("porthole: configuration error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let filter = EnvFilter::try_new(&config.log_filter).unwrap_or_else(|e| {
        eprintln!(
            "porthole: RUST_LOG={:?} is invalid ({e}); using `info`",
            config.log_filter
        );
        EnvFilter::new("info")
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer())
        .init();

    let app = match porthole::app::start(config).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!("start-up failed: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let stop = app.shutdown_handle();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = stop.send(true);
    });
    app.wait().await;
    tracing::info!("stopped");
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on unix");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
