//! A TCP front for several local operator replicas, as a Service would be in a cluster: each
//! connection goes to the next backend that accepts it. TLS passes through untouched, so the API
//! server still verifies the replicas' certificates against the published bundle.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Proxy {
    pub port: u16,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and spreads connections over `backends` (ports).
    pub async fn start(backends: Vec<u16>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let next = Arc::new(AtomicUsize::new(0));
        let backends = Arc::new(backends);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                let (next, backends) = (next.clone(), backends.clone());
                tokio::spawn(async move {
                    let start = next.fetch_add(1, Ordering::Relaxed);
                    for i in 0..backends.len() {
                        let port = backends[(start + i) % backends.len()];
                        if let Ok(outbound) = TcpStream::connect(("127.0.0.1", port)).await {
                            let (mut a, mut b) = (inbound, outbound);
                            let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                            return;
                        }
                    }
                });
            }
        });
        Proxy { port, task }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
