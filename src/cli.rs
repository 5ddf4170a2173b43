//! Command-line interface.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Kubernetes operator for the TrustyAI Service: reconciles TrustyAIService objects and serves
/// their admission and conversion webhooks from one process.
#[derive(Debug, Parser)]
#[command(name = "trustyai-operator", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator: webhook server, certificate maintenance and the reconcile loop.
    Run(Box<RunArgs>),
    /// Print the TrustyAIService CustomResourceDefinition (both versions, v1 stored) as YAML.
    Crd,
    /// Print the operator's version.
    Version,
}

/// Logging options, shared by every subcommand.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter in `tracing` EnvFilter syntax, for example `info` or `trustyai=debug,kube=warn`.
    #[arg(long, env = "RUST_LOG", default_value = "info", global = true)]
    pub log_level: String,

    /// Log format: `json` for log collectors, `text` for terminals.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Namespace the operator runs in: its certificate Secret, Lease and ConfigMap live there.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "trustyai-operator-system"
    )]
    pub namespace: String,

    /// Path of a kubeconfig file; without it the in-cluster config or `KUBECONFIG` is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}
