//! The offline commands (`validate`, `convert`): the webhooks' pure functions applied to
//! manifest files, for CI pipelines and GitOps repositories.

pub mod convert;
pub mod lists;
pub mod validate;

use std::io::Read;
use std::path::Path;

/// A file's text, or stdin's for `-`, with the name to report it by (`stdin` or the path);
/// on failure the name and the error.
fn read_input(path: &Path) -> Result<(String, String), (String, std::io::Error)> {
    if path == Path::new("-") {
        let mut text = String::new();
        return match std::io::stdin().read_to_string(&mut text) {
            Ok(_) => Ok(("stdin".into(), text)),
            Err(e) => Err(("stdin".into(), e)),
        };
    }
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((name, text)),
        Err(e) => Err((name, e)),
    }
}
