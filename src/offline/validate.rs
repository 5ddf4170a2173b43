//! `trustyai-operator validate` (being written).
use std::process::ExitCode;

/// Runs `validate`.
pub fn run(_args: &crate::cli::ValidateArgs) -> ExitCode {
    eprintln!("error: validate is being written");
    ExitCode::from(2)
}
