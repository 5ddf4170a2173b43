//! The operator's image, from the repository's `Dockerfile`: the build stage's `RUN` is run in
//! the repository (what the build stage copies), and the final stage is assembled from its
//! `COPY --from` sources, with its user, entrypoint, command, ports and labels.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Image, dockerfile};

/// The repository's root.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the operator's release binary as the Dockerfile says, then its image.
pub fn build() -> Result<Image, String> {
    build_labelled(&[])
}

/// As [`build`], with labels beyond the Dockerfile's: the same binary under another image
/// (another tag), as a rebuild that changed only metadata gives (an upgrade to test with).
pub fn build_labelled(extra_labels: &[(&str, &str)]) -> Result<Image, String> {
    let root = repository();
    let dockerfile = root.join("Dockerfile");
    let text = std::fs::read_to_string(&dockerfile)
        .map_err(|e| format!("reading {}: {e}", dockerfile.display()))?;
    let mut recipe =
        dockerfile::parse(&text).map_err(|e| format!("{}: {e}", dockerfile.display()))?;
    for (key, value) in extra_labels {
        recipe
            .config
            .labels
            .insert((*key).to_owned(), (*value).to_owned());
    }
    let started = std::time::Instant::now();
    crate::command::run(
        Command::new("sh")
            .arg("-c")
            .arg(&recipe.build)
            .current_dir(&root),
        &format!("the Dockerfile's build ({})", recipe.build),
    )?;
    eprintln!(
        "operator image: build stage done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let rootfs = super::scratch_dir("operator-root")?;
    let _ = std::fs::remove_dir_all(&rootfs);
    let result = assemble(&root, &recipe, &rootfs);
    let _ = std::fs::remove_dir_all(&rootfs);
    result
}

fn assemble(root: &Path, recipe: &dockerfile::Recipe, rootfs: &Path) -> Result<Image, String> {
    let build_dir = recipe.build_dir.trim_end_matches('/');
    for (source, destination) in &recipe.copies {
        let relative = source
            .strip_prefix(build_dir)
            .and_then(|s| s.strip_prefix('/'))
            .ok_or_else(|| {
                format!("COPY source {source} is not under the build stage's {build_dir}")
            })?;
        let from = root.join(relative);
        let to = rootfs.join(destination.trim_start_matches('/'));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::copy(&from, &to).map_err(|e| format!("copying {}: {e}", from.display()))?;
    }
    super::build("trustyai-operator", rootfs, &recipe.config)
}
