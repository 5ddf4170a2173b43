//! `trustyai-operator convert` (being written).
use std::process::ExitCode;

/// Runs `convert`.
pub fn run(_args: &crate::cli::ConvertArgs) -> ExitCode {
    eprintln!("error: convert is being written");
    ExitCode::from(2)
}
