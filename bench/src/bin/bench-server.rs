//! The webhook HTTPS server for the load benchmark: `webhook_router` plus a trivial `/baseline`
//! route on the operator's `serve_https` stack, with a fresh certificate (rcgen, ring) written to
//! `--dir` (`ca.pem`). Prints `PORT <port>` on stdout once listening; stops when stdin closes.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::body::Bytes;
use clap::Parser;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use tokio::net::TcpListener;
use trustyai_webhooks::{AdmissionSettings, HttpsOptions, ServingCertificate, WebhookState};

#[derive(Parser)]
struct Args {
    /// Folder for `ca.pem` (created if needed).
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    address: std::net::SocketAddr,
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
    let serving =
        ServingCertificate::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
            .context("serving certificate")?;

    let state = WebhookState::new(AdmissionSettings {
        allowed_image_prefixes: trustyai_bench::fixtures::allowed_image_prefixes(),
    });
    let router =
        trustyai_webhooks::webhook_router(state).route("/baseline", axum::routing::post(baseline));
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
        HttpsOptions::default(),
        stdin_closed,
    )
    .await?;
    Ok(())
}
