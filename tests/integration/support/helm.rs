//! The helm built by `make control-plane`, for the chart tests.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use trustyai_local_cluster::ControlPlane;

/// The chart's folder in the repository.
pub fn chart_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/trustyai-operator")
}

/// `helm <command> <release> <the chart's folder> <args>` ([`helm`]): install, upgrade or
/// render the repository's chart.
pub fn helm_chart(
    cp: Option<&ControlPlane>,
    command: &str,
    release: &str,
    args: &[&str],
) -> (bool, String, String) {
    let chart = chart_dir();
    let mut all = vec![command, release, chart.to_str().expect("path")];
    all.extend_from_slice(args);
    helm(cp, &all)
}

/// Runs the helm built by `make control-plane`, with the control plane's kubeconfig. Helm's
/// caches and configuration (and its Kubernetes client's discovery cache) go into the control
/// plane's working folder, or without one into a folder removed after the call: never into the
/// user's home.
pub fn helm(cp: Option<&ControlPlane>, args: &[&str]) -> (bool, String, String) {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let bin = trustyai_local_cluster::binary("helm").unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(bin);
    cmd.args(args);
    let (home, temporary) = match cp {
        Some(cp) => (cp.dir.join("helm"), false),
        None => {
            let n = CALLS.fetch_add(1, Ordering::SeqCst);
            let dir =
                std::env::temp_dir().join(format!("trustyai-helm-{}-{n}", std::process::id()));
            (dir, true)
        }
    };
    cmd.env("HELM_CACHE_HOME", home.join("cache"))
        .env("KUBECACHEDIR", home.join("kube-cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(cp) = cp {
        cmd.arg("--kubeconfig").arg(&cp.kubeconfig);
    }
    let out = cmd.output();
    if temporary {
        let _ = std::fs::remove_dir_all(&home);
    }
    let out = out.expect("helm runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}
