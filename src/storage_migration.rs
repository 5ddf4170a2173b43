//! Storage-version migration (being written).
use std::process::ExitCode;

/// Runs `migrate-storage`.
pub async fn run_cli(_args: &crate::cli::MigrateStorageArgs) -> ExitCode {
    eprintln!("error: migrate-storage is being written");
    ExitCode::from(2)
}
