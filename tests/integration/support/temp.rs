//! Folders for files a test hands to a tool, under the system temp dir and never left there.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// An empty folder of its own under the system temp dir, removed with what it holds when
/// dropped: also when the test panics.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `trustyai-<what>-<pid>-<n>`: `n` counts the folders of this process, so that
    /// tests running side by side never share one.
    pub fn new(what: &str) -> Self {
        static CREATED: AtomicUsize = AtomicUsize::new(0);
        let n = CREATED.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("trustyai-{what}-{}-{n}", std::process::id()));
        // A folder of the same name can only be a leftover of an earlier process with this pid.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        Self { path }
    }

    /// `name` in the folder.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
