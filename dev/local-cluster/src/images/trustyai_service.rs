//! The TrustyAI service's image, from its source: `dev/images/trustyai-service.sh` follows the
//! source's Containerfile on the Debian 13 base, and what runs from the image (user, command,
//! ports, environment, labels) is read from that Containerfile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::process::Command;

use super::{Image, InputDigest, cached, debian, dockerfile, operator::repository};
use crate::command::run;

/// The folder of the operand sources (`trustyai-service/`, `kube-rbac-proxy-odh/`):
/// `TRUSTYAI_OPERAND_DIR`, else `shared/operand` beside the repository.
pub fn operand_dir() -> PathBuf {
    match std::env::var_os("TRUSTYAI_OPERAND_DIR") {
        Some(path) => PathBuf::from(path),
        None => repository().join("../shared/operand"),
    }
}

/// The operand source `name` (a folder of `operand_dir()`), checked by a file it must hold.
pub fn operand_source(name: &str, marker: &str) -> Result<PathBuf, String> {
    let path = operand_dir().join(name);
    if path.join(marker).exists() {
        Ok(path)
    } else {
        Err(format!(
            "{name}'s source is not at {} (set TRUSTYAI_OPERAND_DIR to the folder that holds it)",
            path.display()
        ))
    }
}

/// The service's source.
pub fn source() -> Result<PathBuf, String> {
    operand_source("trustyai-service", "pyproject.toml")
}

/// The version the built package reports: its source's digest, since the source carries no
/// version of its own (the upstream build takes it from git tags).
fn version(key: &str) -> String {
    format!("0.0.0+src.{key}")
}

/// The service's image, built if no image of the same source and recipes is cached.
pub fn build() -> Result<Image, String> {
    let source = source()?;
    let recipe = debian::recipes().join("trustyai-service.sh");
    let key = InputDigest::default()
        .file("trustyai-service.sh", &recipe)?
        .file("debian-base.sh", &debian::recipes().join("debian-base.sh"))?
        .folder("source", &source)?
        .key();
    cached("trustyai-service", &key, || {
        let base = debian::base()?;
        let root = super::scratch_dir("trustyai-service-root")?;
        let result = assemble(&source, &recipe, &base, &root, &key);
        let _ = std::fs::remove_dir_all(&root);
        result
    })
}

fn assemble(
    source: &Path,
    recipe: &Path,
    base: &Path,
    root: &Path,
    key: &str,
) -> Result<Image, String> {
    let version = version(key);
    run(
        Command::new(recipe)
            .arg(source)
            .arg(base)
            .arg(&version)
            .arg(root),
        "building the TrustyAI service's root (dev/images/trustyai-service.sh)",
    )?;
    let containerfile = source.join("Containerfile");
    let text = std::fs::read_to_string(&containerfile)
        .map_err(|e| format!("reading {}: {e}", containerfile.display()))?;
    let args = BTreeMap::from([
        ("VERSION".to_owned(), version),
        ("BUILD_DATE".to_owned(), String::new()),
        ("VCS_REF".to_owned(), String::new()),
    ]);
    let mut config = dockerfile::runtime_config(&text, &args)
        .map_err(|e| format!("{}: {e}", containerfile.display()))?;
    // The Containerfile's base image puts its venv, /opt/app-root, first on PATH; this base is
    // plain Debian, so the image says it.
    config.env.insert(
        0,
        "PATH=/opt/app-root/bin:/usr/local/bin:/usr/bin:/bin".into(),
    );
    config.labels.insert(
        "org.opencontainers.image.base.name".into(),
        "debian:trixie (debootstrap --variant=minbase, made by dev/images/debian-base.sh)".into(),
    );
    super::build("trustyai-service", root, &config)
}
