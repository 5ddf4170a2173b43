//! A TCP front for several local operator replicas, as a Service would be in a cluster: each
//! connection goes to the next backend that accepts it. TLS passes through untouched, so the API
//! server still verifies the replicas' certificates against the published bundle.
//!
//! [`Proxy::start_ready_aware`] also skips backends whose `/readyz` does not answer 200, as a
//! Service stops routing to a pod that is not ready (a draining replica). [`Proxy::gated`] holds
//! every connection until [`Proxy::open`] is called (a front for an API server that is "not
//! reachable yet").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Proxy {
    pub port: u16,
    task: JoinHandle<()>,
    gate: watch::Sender<bool>,
}

/// One backend: the port connections go to and, optionally, the ops port whose `/readyz`
/// decides whether it gets new connections.
#[derive(Debug, Clone, Copy)]
struct Backend {
    port: u16,
    ops_port: Option<u16>,
}

impl Proxy {
    /// Listens on a free loopback port and spreads connections over `(webhook port, ops port)`
    /// pairs: a backend whose `/readyz` is not 200 gets no new connections (when none is ready,
    /// any that accepts does).
    pub async fn start_ready_aware(backends: Vec<(u16, u16)>) -> Proxy {
        let backends = backends
            .into_iter()
            .map(|(port, ops)| Backend {
                port,
                ops_port: Some(ops),
            })
            .collect();
        Self::serve(backends, true).await
    }

    /// A front for one backend that holds every connection until [`Proxy::open`].
    pub async fn gated(backend: u16) -> Proxy {
        let backends = vec![Backend {
            port: backend,
            ops_port: None,
        }];
        Self::serve(backends, false).await
    }

    /// Lets held and later connections through (see [`Proxy::gated`]).
    pub fn open(&self) {
        self.gate.send_replace(true);
    }

    async fn serve(backends: Vec<Backend>, open: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let next = Arc::new(AtomicUsize::new(0));
        let backends = Arc::new(backends);
        let (gate, gate_rx) = watch::channel(open);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                let (next, backends, mut gate_rx) =
                    (next.clone(), backends.clone(), gate_rx.clone());
                tokio::spawn(async move {
                    if gate_rx.wait_for(|open| *open).await.is_err() {
                        return;
                    }
                    let start = next.fetch_add(1, Ordering::Relaxed);
                    let ordered: Vec<Backend> = (0..backends.len())
                        .map(|i| backends[(start + i) % backends.len()])
                        .collect();
                    let mut candidates = Vec::new();
                    for backend in &ordered {
                        match backend.ops_port {
                            Some(ops)
                                if !trustyai_local_cluster::readyz_ok(
                                    ops,
                                    Duration::from_secs(1),
                                )
                                .await => {}
                            _ => candidates.push(*backend),
                        }
                    }
                    // Nothing ready: fall back to whatever accepts.
                    candidates.extend(ordered);
                    for backend in candidates {
                        if let Ok(outbound) = TcpStream::connect(("127.0.0.1", backend.port)).await
                        {
                            let (mut a, mut b) = (inbound, outbound);
                            let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                            return;
                        }
                    }
                });
            }
        });
        Proxy { port, task, gate }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
