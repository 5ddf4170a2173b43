//! The Debian 13 base every Debian-based image made here starts from, made once by
//! `dev/images/debian-base.sh` (debootstrap from Debian's mirror) and cached by that recipe.

use std::path::PathBuf;
use std::process::Command;

use super::{InputDigest, cache_dir, operator::repository};
use crate::command::run;

/// The recipes' folder in the repository.
pub fn recipes() -> PathBuf {
    repository().join("dev/images")
}

/// The base root as a tar, made if it is not cached. Serialised across processes: two builds
/// would fetch the same packages twice.
pub fn base() -> Result<PathBuf, String> {
    let script = recipes().join("debian-base.sh");
    let key = InputDigest::default()
        .file("debian-base.sh", &script)?
        .key();
    let cache = cache_dir()?;
    let out = cache.join(format!("debian-trixie-{key}.tar"));
    let lock_path = cache.join(".debian-base.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    if out.exists() {
        return Ok(out);
    }
    let started = std::time::Instant::now();
    run(
        Command::new(&script).arg(&out),
        "making the Debian 13 base (dev/images/debian-base.sh)",
    )?;
    eprintln!(
        "debian base: made in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}
