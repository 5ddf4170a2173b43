//! One shutdown signal for the whole process: SIGTERM or Ctrl-C cancels a token that every
//! task watches, so the HTTPS server drains, the controller finishes in-flight reconciles and
//! the lease is released before the process exits.

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGTERM or Ctrl-C. A second signal is not handled specially:
/// every drain is bounded, so the process still ends.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::error!(error = %crate::error_chain::Chain(&e), "cannot listen for SIGTERM; only Ctrl-C stops the operator");
                    std::future::pending::<()>().await
                }
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => tracing::info!("Ctrl-C received; shutting down"),
            _ = term => tracing::info!("SIGTERM received; shutting down"),
        }
        token.cancel();
    });
}
