//! Logging setup: `tracing` with a JSON format for production and a readable one for terminals.

use tracing_subscriber::EnvFilter;

use crate::cli::{LogArgs, LogFormat};

/// Errors setting up logging.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("a global logger is already installed: {0}")]
    Install(String),
}

/// Installs the global subscriber. Logs go to stderr so that commands which print YAML to
/// stdout (`crd`, `convert`) stay pipeable.
pub fn init(args: &LogArgs) -> Result<(), TelemetryError> {
    let filter = EnvFilter::try_new(&args.log_level).map_err(|source| TelemetryError::Filter {
        filter: args.log_level.clone(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match args.log_format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.map_err(|e| TelemetryError::Install(e.to_string()))
}
