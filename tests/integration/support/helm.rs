//! The helm built by `make control-plane`, for the chart tests.

use std::process::Command;

use trustyai_local_cluster::ControlPlane;

/// The chart's folder in the repository.
pub fn chart_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/trustyai-operator")
}

/// Runs the helm built by `make control-plane`, with the control plane's kubeconfig.
pub fn helm(cp: Option<&ControlPlane>, args: &[&str]) -> (bool, String, String) {
    let bin = trustyai_local_cluster::binary("helm").unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(bin);
    cmd.args(args);
    // Keep helm's caches and config out of the user's home.
    let home = std::env::temp_dir().join(format!("trustyai-helm-{}", std::process::id()));
    cmd.env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(cp) = cp {
        cmd.arg("--kubeconfig").arg(&cp.kubeconfig);
    }
    let out = cmd.output().expect("helm runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}
