//! The webhook HTTPS server on its own, for the load benchmark and the hostile-input tests
//! (`tests/hostile.rs`): `webhook_router` plus two baseline routes on the operator's
//! `serve_https` stack with its default limits (flags override them), and a fresh certificate
//! (rcgen, ring) written to `--dir` (`ca.pem`, and `tls.crt`/`tls.key` for a second server). Logs warnings to stderr as the operator would.
//! Prints `PORT <port>` on stdout once listening; stops when stdin closes.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::body::Bytes;
use clap::Parser;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use tokio::net::TcpListener;
use trustyai_webhooks::{
    AdmissionSettings, HttpsOptions, PathLimits, ServingCertificate, WebhookState,
};

#[derive(Parser)]
struct Args {
    /// Folder for `ca.pem` (created if needed).
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    address: std::net::SocketAddr,
    /// Memory budget of requests in flight, MiB (default: the server's).
    #[arg(long)]
    memory_budget_mib: Option<usize>,
    /// Queue time for room in the budget, ms, of every path.
    #[arg(long)]
    queue_timeout_ms: Option<u64>,
    /// Deadline of every request, its queue time included, ms, of every path.
    #[arg(long)]
    request_timeout_ms: Option<u64>,
    /// Idle timeout of connections, ms.
    #[arg(long)]
    idle_timeout_ms: Option<u64>,
    /// Most connections at once.
    #[arg(long)]
    max_connections: Option<usize>,
    /// TLS handshake deadline, ms.
    #[arg(long)]
    handshake_timeout_ms: Option<u64>,
    /// PEM file of the CA client certificates must chain to.
    #[arg(long)]
    client_ca: Option<PathBuf>,
}

impl Args {
    fn options(&self) -> Result<HttpsOptions> {
        let mut options = HttpsOptions::default();
        // The JSON round trip stands beside `/convert`, so it waits for room in the budget as
        // long as `/convert` does; it reserves what a JSON tree can use, as admission does.
        // With the admission queue time, 64 concurrent 1,000-object bodies got 429s, and an
        // HTTP/1.1 answer sent before its body was read closes the connection.
        options.path_limits.push(PathLimits {
            path: "/baseline/json",
            cost_per_body_byte: trustyai_webhooks::COST_PER_BODY_BYTE,
            ..PathLimits::conversion()
        });
        if let Some(path) = &self.client_ca {
            let pem = std::fs::read(path).context("client CA")?;
            options.client_trust = Some(Arc::new(
                trustyai_webhooks::ClientTrust::from_pem(&pem).context("client CA")?,
            ));
        }
        if let Some(mib) = self.memory_budget_mib {
            options.memory_budget_bytes = mib * 1024 * 1024;
        }
        if let Some(ms) = self.queue_timeout_ms {
            let queue = std::time::Duration::from_millis(ms);
            options.queue_timeout = queue;
            for path in &mut options.path_limits {
                path.queue_timeout = queue;
            }
        }
        if let Some(ms) = self.request_timeout_ms {
            let deadline = std::time::Duration::from_millis(ms);
            options.request_timeout = deadline;
            for path in &mut options.path_limits {
                path.request_timeout = deadline;
            }
        }
        if let Some(ms) = self.idle_timeout_ms {
            options.idle_timeout = std::time::Duration::from_millis(ms);
        }
        if let Some(n) = self.max_connections {
            options.max_connections = n;
        }
        if let Some(ms) = self.handshake_timeout_ms {
            options.handshake_timeout = std::time::Duration::from_millis(ms);
        }
        Ok(options)
    }
}

/// The cost no conversion can avoid: the review parsed into JSON values and written back
/// unchanged.
async fn json_roundtrip(body: Bytes) -> axum::response::Response {
    let answer = serde_json::from_slice::<serde_json::Value>(&body)
        .and_then(|review| serde_json::to_vec(&review))
        .unwrap_or_default();
    axum::response::IntoResponse::into_response(([("content-type", "application/json")], answer))
}

/// The same path and the same bytes in, a fixed small JSON out: the cost of TLS, HTTP, routing
/// and the server's layers without any of our logic.
async fn baseline(body: Bytes) -> axum::response::Response {
    let _ = body.len();
    axum::response::IntoResponse::into_response((
        [("content-type", "application/json")],
        r#"{"ok":true}"#,
    ))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    std::fs::create_dir_all(&args.dir)?;

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_owned()])?;
    leaf.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse()?));
    let cert = leaf.signed_by(&key, &issuer)?;
    std::fs::write(args.dir.join("ca.pem"), ca_cert.pem())?;
    // The same certificate for a second server under test (`side_by_side`'s Go server).
    std::fs::write(args.dir.join("tls.crt"), cert.pem())?;
    std::fs::write(args.dir.join("tls.key"), key.serialize_pem())?;
    let serving =
        ServingCertificate::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
            .context("serving certificate")?;

    let state = WebhookState::new(AdmissionSettings {
        allowed_image_prefixes: trustyai_bench::fixtures::allowed_image_prefixes(),
    });
    let router = trustyai_webhooks::webhook_router(state)
        .route("/baseline", axum::routing::post(baseline))
        .route("/baseline/json", axum::routing::post(json_roundtrip));
    let listener = TcpListener::bind(args.address).await?;
    println!("PORT {}", listener.local_addr()?.port());

    // Stops when stdin closes (the load generator exited), read on a thread of its own.
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        while let Ok(n) = std::io::Read::read(&mut stdin, &mut buf) {
            if n == 0 {
                break;
            }
        }
        let _ = closed_tx.send(());
    });
    let stdin_closed = async {
        let _ = closed_rx.await;
    };
    trustyai_webhooks::serve_https(
        listener,
        router,
        Arc::new(serving),
        args.options()?,
        stdin_closed,
    )
    .await?;
    Ok(())
}
