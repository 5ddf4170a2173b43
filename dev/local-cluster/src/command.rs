//! Running a host command whose failure is an error worth reading.

use std::process::Command;

/// Runs `command`; its standard output when it succeeds, else an error naming `what` with
/// everything it printed.
pub fn run(command: &mut Command, what: &str) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("{what}: cannot run it: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what} ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
