//! The Kubernetes client: from `--kubeconfig` when given, else inferred (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster).

use std::path::Path;

use kube::Client;
use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Errors building the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no Kubernetes client configuration in {path}")]
    ReadKubeconfig {
        path: String,
        #[source]
        source: KubeconfigError,
    },
    #[error("no usable Kubernetes client configuration in {path}")]
    Kubeconfig {
        path: String,
        #[source]
        source: KubeconfigError,
    },
    #[error("no Kubernetes client configuration found (KUBECONFIG, ~/.kube/config, in-cluster)")]
    Infer(#[source] InferConfigError),
    #[error("creating the Kubernetes client")]
    Client(#[source] kube::Error),
}

/// A client for the cluster of `kubeconfig`, or the inferred one.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let path_text = || path.display().to_string();
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| ClientError::ReadKubeconfig {
                    path: path_text(),
                    source,
                })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: path_text(),
                    source,
                })?
        }
        None => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    Client::try_from(with_user_agent(config)).map_err(ClientError::Client)
}

/// [`client`] for a one-shot command: `None` once the reason is printed on stderr, for the
/// command to exit with its own failure code.
pub async fn client_or_report(kubeconfig: Option<&Path>) -> Option<Client> {
    match client(kubeconfig).await {
        Ok(client) => Some(client),
        Err(e) => {
            eprintln!("error: {}", crate::error_chain::Chain(&e));
            None
        }
    }
}

/// The `User-Agent` every request of the operator carries, as Go clients spell theirs:
/// `trustyai-operator/<version> (<os>/<arch>)`. Audit logs then name the operator's traffic, and
/// an API Priority and Fairness FlowSchema can match it.
pub fn user_agent() -> String {
    format!(
        "trustyai-operator/{} ({}/{})",
        crate::VERSION,
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

fn with_user_agent(mut config: kube::Config) -> kube::Config {
    if let Ok(value) = http::HeaderValue::from_str(&user_agent()) {
        config
            .headers
            .retain(|(name, _)| name != http::header::USER_AGENT);
        config.headers.push((http::header::USER_AGENT, value));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A real client, from a kubeconfig, against a loopback listener that records what it is
    /// sent.
    #[tokio::test]
    async fn every_request_carries_the_operators_versioned_user_agent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let dir = std::env::temp_dir().join(format!("trustyai-ua-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
            ),
        )
        .expect("kubeconfig");
        let client = client(Some(&kubeconfig)).await.expect("client");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let body = br#"{"major":"1","minor":"37","gitVersion":"v1.37.2","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.expect("write");
            stream.write_all(body).await.expect("write");
            String::from_utf8_lossy(&head).to_lowercase()
        });
        client.apiserver_version().await.expect("version");
        let head = server.await.expect("server");
        let expected = format!("user-agent: {}", user_agent().to_lowercase());
        assert!(head.contains(&expected), "{head}");
        assert!(user_agent().starts_with(&format!("trustyai-operator/{} (", crate::VERSION)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
