//! `make bench`: runs the HTTPS load benchmark (against `bench-server`), the cluster benchmark
//! (the operator binary against a local control plane), measures the binary, collects the
//! criterion results of `cargo bench -p trustyai-bench`, and writes
//! `bench/results/latest.{json,md}`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use trustyai_bench::report::{self, Binary, Machine, Results};

#[derive(Parser)]
#[command(about = "The TrustyAI operator's benchmarks (see README, Performance)")]
struct Args {
    /// The operator binary (release build preferred).
    #[arg(long, default_value = "target/release/trustyai-operator")]
    operator: PathBuf,
    /// TrustyAIServices created at once in the cluster benchmark.
    #[arg(long, default_value_t = 100)]
    n: usize,
    /// Namespaces the TrustyAIServices are spread over: TrustyAIService i goes to namespace
    /// i % K, each namespace with its own credentials Secret (`--n 10000 --namespaces 1000`
    /// for the scale run).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    namespaces: u32,
    /// `spec.replicas` of every TrustyAIService (default: left unset, i.e. 1 pod each). The
    /// scale run uses 0: 10,000 Deployments then start no pods. The local cluster's one
    /// simulated kwok node fits ~426 pods, and 10,000 Pending pods would make the scheduler
    /// and the controller-manager what is measured. A Deployment of 0 replicas is Available,
    /// so its TrustyAIService still becomes Ready.
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    replicas: Option<i32>,
    /// Seconds at rest after reconciling, to count the requests and writes of a quiet operator.
    #[arg(long, default_value_t = 60)]
    rest_seconds: u64,
    /// Seconds per load cell (endpoint × protocol × concurrency).
    #[arg(long, default_value_t = 2.0)]
    seconds_per_cell: f64,
    /// Concurrency levels of the load benchmark.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    concurrency: Vec<usize>,
    /// Criterion's output folder, read for the pure-function results.
    #[arg(long, default_value = "target/criterion")]
    criterion_dir: PathBuf,
    /// Where `latest.json` and `latest.md` go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Skip the HTTPS load benchmark (e.g. for a `--n 1000` run of the cluster part alone).
    #[arg(long)]
    skip_http: bool,
    /// Skip the benchmark against the local control plane.
    #[arg(long)]
    skip_cluster: bool,
    /// The Go operator's conversion webhook (`bench/go-conversion/build.sh` prints its path):
    /// runs `/convert` of both side by side and writes `<out>/side-by-side/side-by-side.{json,md}`.
    #[arg(long)]
    go_conversion: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let machine = Machine::detect();
    let operator = std::fs::canonicalize(&args.operator)
        .with_context(|| format!("the operator binary {}", args.operator.display()))?;

    let http = if args.skip_http {
        None
    } else {
        let server = std::env::current_exe()?
            .parent()
            .context("exe folder")?
            .join("bench-server");
        eprintln!(
            "HTTPS load benchmark ({} s per cell)…",
            args.seconds_per_cell
        );
        let runtime = tokio::runtime::Runtime::new()?;
        Some(runtime.block_on(trustyai_bench::http_load::run(
            &server,
            args.seconds_per_cell,
            &args.concurrency,
        ))?)
    };

    if let Some(go) = &args.go_conversion {
        let server = std::env::current_exe()?
            .parent()
            .context("exe folder")?
            .join("bench-server");
        eprintln!(
            "/convert beside the Go operator's ({} s per cell and server)…",
            args.seconds_per_cell
        );
        let runtime = tokio::runtime::Runtime::new()?;
        let results = runtime.block_on(trustyai_bench::side_by_side::run(
            &server,
            go,
            args.seconds_per_cell,
            &args.concurrency,
        ))?;
        let dir = args.out.join("side-by-side");
        println!("{}", trustyai_bench::side_by_side::write(&dir, &results)?);
        if args.skip_http && args.skip_cluster {
            // Only the side-by-side was asked for: the other results stay as they are.
            return Ok(());
        }
    }

    let cluster = if args.skip_cluster {
        None
    } else {
        Some(trustyai_bench::cluster::run(
            &operator,
            &trustyai_bench::cluster::Plan {
                n: args.n,
                namespaces: args.namespaces as usize,
                replicas: args.replicas,
                rest: Duration::from_secs(args.rest_seconds),
            },
        )?)
    };

    let results = Results {
        generated_unix_seconds: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine,
        pure: report::read_criterion(&args.criterion_dir),
        http,
        cluster,
        binary: std::fs::metadata(&operator).ok().map(|m| Binary {
            path: args.operator.display().to_string(),
            bytes: m.len(),
        }),
    };
    let md = report::write(&args.out, &results)?;
    println!("{md}");
    eprintln!(
        "results: {} and {}",
        args.out.join("latest.json").display(),
        args.out.join("latest.md").display()
    );
    Ok(())
}
