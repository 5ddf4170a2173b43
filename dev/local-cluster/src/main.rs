//! `trustyai-local-cluster`: the README's run command. Starts the local control plane (or uses
//! the cluster of `--kubeconfig`), starts the operator against it with its webhooks on
//! `https://127.0.0.1:<port>`, applies a sample TrustyAIService, and prints what to look at.
//! Ctrl-C stops everything and leaves nothing running. The operator's own logs go to a file
//! (its path is printed) unless `--operator-logs console`, so the terminal keeps what to do next.

use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::time::Duration;

use trustyai_local_cluster::{ControlPlane, NodeKind};

struct Options {
    operator: PathBuf,
    kubeconfig: Option<PathBuf>,
    sample: PathBuf,
    namespace: String,
    webhook_port: u16,
    ops_port: u16,
    logs_on_console: bool,
    node: NodeKind,
}

fn usage() -> &'static str {
    "usage: trustyai-local-cluster --operator PATH [--kubeconfig PATH] [--sample FILE] [--namespace NS] \
     [--webhook-port PORT] [--ops-port PORT] [--operator-logs file|console] [--node simulated|real]\n\
     Without --kubeconfig a local control plane is started; with it, the operator runs against that cluster.\n\
     --webhook-port (default 9443): where the operator serves its webhooks, on 127.0.0.1.\n\
     --ops-port (default 9080): /healthz, /readyz and /metrics, on 127.0.0.1.\n\
     --operator-logs (default file): the operator's logs in target/trustyai-local/operator.log, or on this terminal.\n\
     --node (default simulated): kwok's node, or a real kubelet with containerd (root and the Debian packages of\n\
     `make prerequisites`; the sample's pods then need the TrustyAI service's image imported, which is not built here yet)."
}

fn parse() -> Result<Options, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut o = Options {
        operator: root.join("target/debug/trustyai-operator"),
        kubeconfig: None,
        sample: root.join("crds/samples/v1-pvc.yaml"),
        namespace: "trustyai-demo".into(),
        webhook_port: 9443,
        ops_port: 9080,
        logs_on_console: false,
        node: NodeKind::Simulated,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))
        };
        match flag.as_str() {
            "--operator" => o.operator = value()?.into(),
            "--kubeconfig" => o.kubeconfig = Some(value()?.into()),
            "--sample" => o.sample = value()?.into(),
            "--namespace" => o.namespace = value()?,
            "--webhook-port" => {
                o.webhook_port = value()?
                    .parse()
                    .map_err(|e| format!("--webhook-port: {e}"))?
            }
            "--ops-port" => {
                o.ops_port = value()?.parse().map_err(|e| format!("--ops-port: {e}"))?
            }
            "--operator-logs" => {
                o.logs_on_console = match value()?.as_str() {
                    "console" => true,
                    "file" => false,
                    other => {
                        return Err(format!(
                            "--operator-logs takes file or console, not {other}\n{}",
                            usage()
                        ));
                    }
                }
            }
            "--node" => {
                o.node = match value()?.as_str() {
                    "simulated" => NodeKind::Simulated,
                    "real" => NodeKind::Real,
                    other => {
                        return Err(format!(
                            "--node takes simulated or real, not {other}\n{}",
                            usage()
                        ));
                    }
                }
            }
            "-h" | "--help" => return Err(usage().into()),
            other => return Err(format!("unknown argument {other}\n{}", usage())),
        }
    }
    Ok(o)
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> Result<String, String> {
    trustyai_local_cluster::command::run(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg(trustyai_local_cluster::kubectl_cache_dir(kubeconfig))
            .args(args),
        &format!("kubectl {}", args.join(" ")),
    )
}

fn stop(child: &mut Child) {
    // SIGTERM first so the operator drains and releases its lease; then make sure it is gone.
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    for _ in 0..50 {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
}

fn run(o: Options) -> Result<(), String> {
    if !o.operator.is_file() {
        return Err(format!(
            "operator binary {} not found: run `cargo build` first (make run does)",
            o.operator.display()
        ));
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (kubeconfig, _control_plane) = match &o.kubeconfig {
        Some(path) => (path.clone(), None),
        None => {
            let node = match o.node {
                NodeKind::Simulated => "kwok's simulated node",
                NodeKind::Real => "a real node: containerd, the kubelet, kube-proxy",
            };
            eprintln!(
                "starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, {node})..."
            );
            let cp = ControlPlane::start_with(trustyai_local_cluster::Options {
                node: o.node,
                ..trustyai_local_cluster::Options::default()
            })?;
            (cp.kubeconfig.clone(), Some(cp))
        }
    };
    kubectl(&kubeconfig, &["create", "namespace", &o.namespace]).or_else(|e| {
        if e.contains("AlreadyExists") {
            Ok(String::new())
        } else {
            Err(e)
        }
    })?;
    let operator_ns = "trustyai-operator-system";
    kubectl(&kubeconfig, &["create", "namespace", operator_ns]).or_else(|e| {
        if e.contains("AlreadyExists") {
            Ok(String::new())
        } else {
            Err(e)
        }
    })?;

    eprintln!("starting the operator ({})...", o.operator.display());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let log_path = root.join("target/trustyai-local/operator.log");
    let mut command = Command::new(&o.operator);
    if !o.logs_on_console {
        let file = std::fs::create_dir_all(log_path.parent().unwrap_or(&root))
            .and_then(|()| std::fs::File::create(&log_path))
            .map_err(|e| format!("the operator log {}: {e}", log_path.display()))?;
        command.stderr(file);
        eprintln!("operator logs: {}", log_path.display());
    }
    let mut operator = command
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--namespace")
        .arg(operator_ns)
        .arg("--local-webhook-address")
        .arg(format!("127.0.0.1:{}", o.webhook_port))
        .arg("--create-webhook-configurations")
        .arg("--ops-address")
        .arg(format!("127.0.0.1:{}", o.ops_port))
        .spawn()
        .map_err(|e| format!("starting the operator: {e}"))?;

    // The operator applies the CRD itself; wait for it before applying the sample.
    let mut crd_ready = false;
    for _ in 0..150 {
        if let Ok(Some(status)) = operator.try_wait() {
            return Err(format!("the operator exited early ({status})"));
        }
        if kubectl(
            &kubeconfig,
            &[
                "wait",
                "--for=condition=Established",
                "crd/trustyaiservices.trustyai.opendatahub.io",
                "--timeout=1s",
            ],
        )
        .is_ok()
        {
            crd_ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !crd_ready {
        stop(&mut operator);
        return Err("the operator did not install the CRD within 30s".into());
    }
    let sample = o.sample.display().to_string();
    match kubectl(&kubeconfig, &["apply", "-n", &o.namespace, "-f", &sample]) {
        Ok(out) => eprint!("{out}"),
        Err(e) => eprintln!("applying the sample failed: {e}"),
    }
    if o.kubeconfig.is_none() {
        provide_volumes(&kubeconfig, &o.namespace);
    }

    let cluster = if o.kubeconfig.is_some() {
        "your cluster"
    } else {
        "a local control plane"
    };
    let what_to_run = format!(
        "\n  export KUBECONFIG={kc}\n  kubectl get tas -A -o wide      # ready, reason, storage, image, observed generation\n  kubectl describe tas -n {ns}    # conditions and events\n  kubectl get deploy,svc,pvc -n {ns}\n  curl -s http://127.0.0.1:{ops}/readyz   # operator readiness; /metrics for Prometheus\n{logs}",
        kc = kubeconfig.display(),
        ns = o.namespace,
        ops = o.ops_port,
        logs = if o.logs_on_console {
            String::new()
        } else {
            format!("  tail -f {}\n", log_path.display())
        },
    );
    println!(
        "\nThe operator is running against {cluster}.\n{what_to_run}\nPress Ctrl-C to stop everything."
    );
    let mut announced_ready = false;
    let mut polls: u32 = 0;

    let (tx, rx) = std::sync::mpsc::channel();
    ctrl_c(tx)?;
    loop {
        if rx.recv_timeout(Duration::from_millis(500)).is_ok() {
            eprintln!("stopping...");
            stop(&mut operator);
            return Ok(());
        }
        if let Ok(Some(status)) = operator.try_wait() {
            return Err(format!("the operator exited ({status})"));
        }
        polls = polls.wrapping_add(1);
        // Every 2 s: each look is a kubectl process.
        if !announced_ready && polls.is_multiple_of(4) && samples_ready(&kubeconfig, &o.namespace) {
            announced_ready = true;
            println!(
                "\nThe sample TrustyAIService in {} is Ready.\n{what_to_run}\nPress Ctrl-C to stop everything.",
                o.namespace
            );
        }
    }
}

/// Whether every TrustyAIService in `namespace` has `Ready=True` (and there is at least one).
fn samples_ready(kubeconfig: &std::path::Path, namespace: &str) -> bool {
    kubectl(
        kubeconfig,
        &[
            "get",
            "tas",
            "-n",
            namespace,
            "-o",
            r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ],
    )
    .is_ok_and(|out| {
        let states: Vec<&str> = out.lines().collect();
        !states.is_empty() && states.iter().all(|s| *s == "True")
    })
}

/// The local control plane has no storage provisioner; play one: a hostPath PersistentVolume
/// pre-bound to the claim `<name>-pvc` of every TrustyAIService in `namespace`.
fn provide_volumes(kubeconfig: &std::path::Path, namespace: &str) {
    let names = match kubectl(
        kubeconfig,
        &[
            "get",
            "tas",
            "-n",
            namespace,
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    ) {
        Ok(names) => names,
        Err(e) => {
            eprintln!("listing the samples failed: {e}");
            return;
        }
    };
    for name in names.split_whitespace() {
        let claim = format!("{name}-pvc");
        let pv = format!(
            r#"{{"apiVersion":"v1","kind":"PersistentVolume","metadata":{{"name":"{namespace}-{claim}"}},"spec":{{"capacity":{{"storage":"1Gi"}},"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain","hostPath":{{"path":"/tmp/{namespace}-{claim}"}},"claimRef":{{"namespace":"{namespace}","name":"{claim}"}}}}}}"#
        );
        let file = std::env::temp_dir().join(format!("trustyai-pv-{namespace}-{claim}.json"));
        let applied = std::fs::write(&file, pv)
            .map_err(|e| e.to_string())
            .and_then(|()| kubectl(kubeconfig, &["apply", "-f", &file.display().to_string()]));
        match applied {
            Ok(out) => eprint!("{out}"),
            Err(e) => eprintln!("providing a volume for {claim} failed: {e}"),
        }
    }
}

/// Sends on `tx` when Ctrl-C (SIGINT) or SIGTERM arrives, from a small Tokio runtime thread.
fn ctrl_c(tx: std::sync::mpsc::Sender<()>) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        rt.block_on(async {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            let _ = tx.send(());
        });
    });
    Ok(())
}

fn main() -> ExitCode {
    match parse().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
