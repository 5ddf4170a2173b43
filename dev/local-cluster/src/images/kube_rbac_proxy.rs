//! kube-rbac-proxy's images: OpenDataHub's fork (the chart's default proxy) from its source in
//! the operand folder, and upstream from the Go module proxy. Each is the static binary alone,
//! laid out as upstream's own Dockerfile does (`/usr/local/bin/kube-rbac-proxy`, user 65532).

use std::path::Path;
use std::process::Command;

use super::{Image, ImageConfig, InputDigest, cached, trustyai_service::operand_source};
use crate::command::run;

/// The upstream release whose module the Go module proxy serves.
pub const UPSTREAM_VERSION: &str = "v0.19.1";
const MODULE: &str = "github.com/brancz/kube-rbac-proxy";

/// Which build of kube-rbac-proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// OpenDataHub's fork (reads the config's `verb`).
    OpenDataHub,
    /// Upstream `UPSTREAM_VERSION` (takes the verb from the HTTP method).
    Upstream,
}

impl Flavour {
    fn image_name(self) -> &'static str {
        match self {
            Flavour::OpenDataHub => "kube-rbac-proxy-odh",
            Flavour::Upstream => "kube-rbac-proxy",
        }
    }
}

/// The image of `flavour`, built if not cached.
pub fn build(flavour: Flavour) -> Result<Image, String> {
    let name = flavour.image_name();
    let (key, source) = match flavour {
        Flavour::OpenDataHub => {
            let source = operand_source("kube-rbac-proxy-odh", "go.mod")?;
            let key = InputDigest::default().folder("source", &source)?.key();
            (key, source)
        }
        Flavour::Upstream => {
            let key = InputDigest::default()
                .bytes("module", format!("{MODULE}@{UPSTREAM_VERSION}").as_bytes())
                .key();
            (key, module_dir()?)
        }
    };
    cached(name, &key, || {
        let work = super::scratch_dir(&format!("{name}-build"))?;
        let result = build_in(name, &source, &work);
        let _ = run(
            Command::new("chmod").args(["-R", "u+w"]).arg(&work),
            "chmod",
        );
        let _ = std::fs::remove_dir_all(&work);
        result
    })
}

/// Upstream's module, downloaded into Go's module cache.
fn module_dir() -> Result<std::path::PathBuf, String> {
    let out = run(
        Command::new("go")
            .args(["mod", "download", "-json"])
            .arg(format!("{MODULE}@{UPSTREAM_VERSION}")),
        "downloading kube-rbac-proxy's module",
    )?;
    let json: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("go mod download's answer: {e}"))?;
    json["Dir"]
        .as_str()
        .map(Into::into)
        .ok_or_else(|| format!("go mod download named no folder: {out}"))
}

/// Builds in a writable copy of `source`: the module's own `go.mod` (with its `replace`
/// directives, which `go install` of a dependency refuses) governs the build.
fn build_in(name: &str, source: &Path, work: &Path) -> Result<Image, String> {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let copy = work.join("src");
    run(
        Command::new("cp").arg("-r").arg(source).arg(&copy),
        "copying kube-rbac-proxy's source",
    )?;
    run(
        Command::new("chmod").args(["-R", "u+w"]).arg(&copy),
        "making the copy writable",
    )?;
    let root = work.join("root");
    std::fs::create_dir_all(root.join("usr/local/bin")).map_err(|e| e.to_string())?;
    run(
        Command::new("go")
            .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
            .arg(root.join("usr/local/bin/kube-rbac-proxy"))
            .arg("./cmd/kube-rbac-proxy")
            .current_dir(&copy)
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-buildvcs=false"),
        &format!("building {name}"),
    )?;
    if let Ok(license) = std::fs::read(copy.join("LICENSE")) {
        std::fs::create_dir_all(root.join("licenses")).map_err(|e| e.to_string())?;
        std::fs::write(root.join("licenses/LICENSE"), license).map_err(|e| e.to_string())?;
    }
    let config = ImageConfig {
        user: Some("65532:65532".into()),
        entrypoint: vec!["/usr/local/bin/kube-rbac-proxy".into()],
        exposed_ports: vec!["8443/tcp".into()],
        ..ImageConfig::default()
    };
    super::build(name, &root, &config)
}
