//! The Kubernetes client: from `--kubeconfig` when given, else inferred (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster).

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Errors building the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no Kubernetes client configuration: {0}")]
    Config(String),
    #[error("creating the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// A client for the cluster of `kubeconfig`, or the inferred one.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| ClientError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| ClientError::Config(e.to_string()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| ClientError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(ClientError::Client)
}
