use std::process::ExitCode;

use clap::Parser;
use trustyai_operator::cli::{Cli, Command, CrdKind};
use trustyai_operator::error_chain::Chain;
use trustyai_operator::{VERSION, telemetry};

fn main() -> ExitCode {
    // Before any TLS client or server exists: kube and the webhook server both use rustls, and
    // only the ring provider is compiled in.
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("error: a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let go_flags = trustyai_operator::go_flags::translate(std::env::args_os());
    let cli = Cli::parse_from(go_flags.args);
    if let Err(e) = telemetry::init(&cli.log) {
        eprintln!("error: {}", Chain(&e));
        return ExitCode::from(2);
    }
    for notice in &go_flags.notices {
        tracing::warn!(notice = %notice, "the Go operator's command line, translated");
    }
    match cli.command {
        Command::Crd(args) => match match args.kind {
            CrdKind::TrustyAIService => trustyai_crds::crd::crd_yaml(),
            CrdKind::TrustyAIMetric => trustyai_crds::metric::crd::crd_yaml(),
        } {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}", Chain(&e));
                ExitCode::FAILURE
            }
        },
        Command::Validate(args) => trustyai_operator::offline::validate::run(&args),
        Command::Convert(args) => trustyai_operator::offline::convert::run(&args),
        Command::MigrateStorage(args) => {
            run_async(trustyai_operator::storage_migration::run_cli(&args))
        }
        Command::Uninstall(args) => run_async(trustyai_operator::uninstall::run_cli(&args)),
        Command::CheckInstall(args) => run_async(trustyai_operator::install_check::run_cli(&args)),
        Command::Version => {
            println!("trustyai-operator {VERSION}");
            ExitCode::SUCCESS
        }
        Command::Run(args) => run_async(async move {
            match trustyai_operator::run::run(*args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = &e as &dyn std::error::Error, "operator stopped");
                    eprintln!("error: {}", Chain(&e));
                    ExitCode::FAILURE
                }
            }
        }),
    }
}

/// Runs a command that talks to the cluster on a runtime of its own.
fn run_async(command: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}
