//! `trustyai-local-cluster`: the README's run command. Starts the local control plane (or uses
//! the cluster of `--kubeconfig`) and the operator: on a real node as an admin installs it (the
//! chart, with the operator's, the TrustyAI service's and kube-rbac-proxy's images built here),
//! else as a process on this host with its webhooks on `https://127.0.0.1:<port>`. Then it
//! applies a sample TrustyAIService and prints what to look at. Ctrl-C stops everything and
//! leaves nothing running. A host process's logs go to a file (its path is printed) unless
//! `--operator-logs console`, so the terminal keeps what to do next.

use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::time::Duration;

use trustyai_local_cluster::images::{self, Image, kube_rbac_proxy::Flavour};
use trustyai_local_cluster::{ControlPlane, NodeKind};

/// Where the operator runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OperatorIn {
    /// Pods of the chart's Deployment, from the operator's image (needs the real node).
    Pod,
    /// A process on this host, from `--operator`.
    Host,
}

struct Options {
    operator: PathBuf,
    kubeconfig: Option<PathBuf>,
    sample: PathBuf,
    namespace: String,
    webhook_port: u16,
    ops_port: u16,
    logs_on_console: bool,
    /// `None`: real where the machine allows it.
    node: Option<NodeKind>,
    /// `None`: in pods on a real node, on the host otherwise.
    operator_in: Option<OperatorIn>,
}

/// The chart's release and namespace when the operator runs in pods.
const RELEASE: &str = "trustyai";
const OPERATOR_NAMESPACE: &str = "trustyai-operator-system";

fn usage() -> &'static str {
    "usage: trustyai-local-cluster --operator PATH [--kubeconfig PATH] [--sample FILE] [--namespace NS] \
     [--webhook-port PORT] [--ops-port PORT] [--operator-logs file|console] [--node simulated|real]\n\
     [--operator-in pod|host]\n\
     Without --kubeconfig a local control plane is started; with it, the operator runs against that cluster.\n\
     --node (default: real where the machine allows it, else simulated, saying why): a real kubelet with\n\
     containerd (root and the Debian packages of `make prerequisites`), or kwok's simulated node.\n\
     --operator-in (default: pod on a real node, host otherwise): pod installs the chart with the images built\n\
     here (the operator's from the Dockerfile, the TrustyAI service's, kube-rbac-proxy's); host runs --operator\n\
     as a process here, for quick iteration.\n\
     --webhook-port (default 9443), --ops-port (default 9080): a host process's ports on 127.0.0.1 (webhooks;\n\
     /healthz, /readyz, /metrics).\n\
     --operator-logs (default file): a host process's logs in target/trustyai-local/operator.log, or on this terminal."
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
        node: None,
        operator_in: None,
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
            "--operator-in" => {
                o.operator_in = Some(match value()?.as_str() {
                    "pod" => OperatorIn::Pod,
                    "host" => OperatorIn::Host,
                    other => {
                        return Err(format!(
                            "--operator-in takes pod or host, not {other}\n{}",
                            usage()
                        ));
                    }
                })
            }
            "--node" => {
                o.node = match value()?.as_str() {
                    "simulated" => Some(NodeKind::Simulated),
                    "real" => Some(NodeKind::Real),
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

fn create_namespace(kubeconfig: &std::path::Path, name: &str) -> Result<(), String> {
    kubectl(kubeconfig, &["create", "namespace", name])
        .map(|_| ())
        .or_else(|e| {
            if e.contains("AlreadyExists") {
                Ok(())
            } else {
                Err(e)
            }
        })
}

/// The node to start: the one asked for, else real where the machine allows it.
fn choose_node(asked: Option<NodeKind>) -> NodeKind {
    match asked {
        Some(node) => node,
        None => {
            let (node, why_not_real) = NodeKind::best_available();
            if let Some(why) = why_not_real {
                eprintln!("no real node on this machine ({why}): kwok's simulated node instead");
            }
            node
        }
    }
}

fn run(o: Options) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (kubeconfig, control_plane) = match &o.kubeconfig {
        Some(path) => (path.clone(), None),
        None => {
            let node = choose_node(o.node);
            let what = match node {
                NodeKind::Simulated => "kwok's simulated node",
                NodeKind::Real => "a real node: containerd, the kubelet, kube-proxy",
            };
            eprintln!(
                "starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, {what})..."
            );
            let cp = ControlPlane::start_with(trustyai_local_cluster::Options {
                node,
                ..trustyai_local_cluster::Options::default()
            })?;
            (cp.kubeconfig.clone(), Some(cp))
        }
    };
    let real_node = control_plane
        .as_ref()
        .filter(|cp| cp.node == NodeKind::Real);
    let operator_in = match (o.operator_in, real_node) {
        (Some(OperatorIn::Pod), None) => {
            return Err(
                "--operator-in pod needs the local control plane's real node (its images are imported there)"
                    .into(),
            );
        }
        (Some(chosen), _) => chosen,
        (None, Some(_)) => OperatorIn::Pod,
        (None, None) => OperatorIn::Host,
    };
    create_namespace(&kubeconfig, &o.namespace)?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let log_path = root.join("target/trustyai-local/operator.log");
    let mut operator = match (operator_in, real_node) {
        (OperatorIn::Pod, Some(cp)) => {
            install_chart(cp)?;
            None
        }
        _ => Some(start_on_host(&o, &kubeconfig, &log_path)?),
    };

    // The operator applies the CRD itself; wait for it before applying the sample.
    let mut crd_ready = false;
    for _ in 0..150 {
        if let Some(child) = operator.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
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
        if let Some(child) = operator.as_mut() {
            stop(child);
        }
        return Err("the operator did not install the CRD within 30s".into());
    }
    let sample = o.sample.display().to_string();
    match kubectl(&kubeconfig, &["apply", "-n", &o.namespace, "-f", &sample]) {
        Ok(out) => eprint!("{out}"),
        Err(e) => eprintln!("applying the sample failed: {e}"),
    }
    if let Some(cp) = &control_plane {
        provide_volumes(cp, &o.namespace);
    }

    let cluster = if o.kubeconfig.is_some() {
        "your cluster"
    } else {
        "a local control plane"
    };
    let where_it_runs = match operator_in {
        OperatorIn::Pod => format!(
            "The operator runs as pods of the chart's release {RELEASE} in {OPERATOR_NAMESPACE}, on a real node"
        ),
        OperatorIn::Host => format!("The operator runs on this host against {cluster}"),
    };
    let operator_lines = match operator_in {
        OperatorIn::Pod => format!(
            "  kubectl get pods -n {OPERATOR_NAMESPACE}     # the operator's pods (helm test {RELEASE} -n {OPERATOR_NAMESPACE} checks them)\n  kubectl logs -n {OPERATOR_NAMESPACE} -l app.kubernetes.io/name=trustyai-operator -f\n"
        ),
        OperatorIn::Host => format!(
            "  curl -s http://127.0.0.1:{ops}/readyz   # operator readiness; /metrics for Prometheus\n{logs}",
            ops = o.ops_port,
            logs = if o.logs_on_console {
                String::new()
            } else {
                format!("  tail -f {}\n", log_path.display())
            },
        ),
    };
    let what_to_run = format!(
        "\n  export KUBECONFIG={kc}\n  kubectl get tas -A -o wide      # ready, reason, storage, image, observed generation\n  kubectl describe tas -n {ns}    # conditions and events\n  kubectl get pods,deploy,svc,pvc -n {ns}   # the TrustyAI service's pods and objects\n{operator_lines}",
        kc = kubeconfig.display(),
        ns = o.namespace,
    );
    println!("\n{where_it_runs}.\n{what_to_run}\nPress Ctrl-C to stop everything.");
    let mut announced_ready = false;
    let mut polls: u32 = 0;

    let (tx, rx) = std::sync::mpsc::channel();
    ctrl_c(tx)?;
    loop {
        if rx.recv_timeout(Duration::from_millis(500)).is_ok() {
            eprintln!("stopping...");
            if let Some(child) = operator.as_mut() {
                stop(child);
            }
            return Ok(());
        }
        if let Some(child) = operator.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(format!("the operator exited ({status})"));
        }
        polls = polls.wrapping_add(1);
        // Every 2 s: each look is a kubectl process.
        if !announced_ready && polls.is_multiple_of(4) && samples_ready(&kubeconfig, &o.namespace) {
            announced_ready = true;
            // Only on a real node do the service's pods run and answer.
            let try_it = if real_node.is_some() {
                sample_names(&kubeconfig, &o.namespace)
                    .ok()
                    .and_then(|names| names.into_iter().next())
                    .map(|name| try_the_service(&kubeconfig, &o.namespace, &name))
                    .unwrap_or_default()
            } else {
                String::new()
            };
            println!(
                "\nThe sample TrustyAIService in {} is Ready.\n{what_to_run}{try_it}\nPress Ctrl-C to stop everything.",
                o.namespace
            );
        }
    }
}

/// Starts the operator binary on this host, with its webhook configurations pointing here.
fn start_on_host(
    o: &Options,
    kubeconfig: &std::path::Path,
    log_path: &std::path::Path,
) -> Result<Child, String> {
    if !o.operator.is_file() {
        return Err(format!(
            "operator binary {} not found: run `cargo build` first (make run does)",
            o.operator.display()
        ));
    }
    create_namespace(kubeconfig, OPERATOR_NAMESPACE)?;
    eprintln!("starting the operator ({})...", o.operator.display());
    let mut command = Command::new(&o.operator);
    if !o.logs_on_console {
        let file = log_path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::File::create(log_path))
            .map_err(|e| format!("the operator log {}: {e}", log_path.display()))?;
        command.stderr(file);
        eprintln!("operator logs: {}", log_path.display());
    }
    command
        .arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--namespace")
        .arg(OPERATOR_NAMESPACE)
        .arg("--local-webhook-address")
        .arg(format!("127.0.0.1:{}", o.webhook_port))
        .arg("--create-webhook-configurations")
        .arg("--ops-address")
        .arg(format!("127.0.0.1:{}", o.ops_port))
        .spawn()
        .map_err(|e| format!("starting the operator: {e}"))
}

/// Builds the images (each cached by its inputs), imports them into the real node and installs
/// the chart as an admin would, waiting until the operator's pods are Ready.
fn install_chart(cp: &ControlPlane) -> Result<(), String> {
    eprintln!(
        "building the images (the operator's release build from the Dockerfile, the TrustyAI service's, \
         kube-rbac-proxy's; cached after the first time)..."
    );
    let service = std::thread::spawn(images::trustyai_service::build);
    let proxy = std::thread::spawn(|| images::kube_rbac_proxy::build(Flavour::OpenDataHub));
    let operator = images::operator::build()?;
    let joined = |handle: std::thread::JoinHandle<Result<Image, String>>| {
        handle
            .join()
            .map_err(|_| "an image build thread panicked".to_owned())?
    };
    let service = joined(service)?;
    let proxy = joined(proxy)?;
    for image in [&operator, &service, &proxy] {
        eprintln!("importing {} into the node's containerd", image.reference);
        cp.import_image(image)?;
    }
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/trustyai-operator");
    eprintln!("helm install {RELEASE} (2 operator pods; waits until they are Ready)...");
    let helm = trustyai_local_cluster::binary("helm")?;
    let home = cp.dir.join("helm");
    let out = trustyai_local_cluster::command::run(
        Command::new(helm)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("KUBECACHEDIR", home.join("kube-cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .arg("--kubeconfig")
            .arg(&cp.kubeconfig)
            .args(["install", RELEASE])
            .arg(chart)
            .args(["--namespace", OPERATOR_NAMESPACE, "--create-namespace"])
            .args(["--wait", "--timeout", "5m"])
            .arg("--set")
            .arg(format!("image.repository={}", operator.repository()))
            .arg("--set")
            .arg(format!("image.tag={}", operator.tag()))
            .args(["--set", "image.pullPolicy=Never", "--set", "replicaCount=2"])
            .arg("--set")
            .arg(format!("service.serviceImage={}", service.reference))
            .arg("--set")
            .arg(format!("service.kubeRbacProxyImage={}", proxy.reference)),
        "helm install",
    )?;
    eprint!("{out}");
    Ok(())
}

/// `kubectl get` of the TrustyAIServices in `namespace`, printed by the JSONPath template
/// `template`.
fn get_services(
    kubeconfig: &std::path::Path,
    namespace: &str,
    template: &str,
) -> Result<String, String> {
    let output = format!("jsonpath={template}");
    kubectl(kubeconfig, &["get", "tas", "-n", namespace, "-o", &output])
}

/// The names of the TrustyAIServices in `namespace`.
fn sample_names(kubeconfig: &std::path::Path, namespace: &str) -> Result<Vec<String>, String> {
    let names = get_services(kubeconfig, namespace, "{.items[*].metadata.name}")?;
    Ok(names.split_whitespace().map(str::to_owned).collect())
}

/// Shell commands that upload the sample inferences to the TrustyAIService `name` and read a
/// fairness metric (SPD) back, as a client of the service does: through `<name>-tls`
/// (kube-rbac-proxy), with the token of a ServiceAccount whose Role grants `get` on that
/// Service only, trusting the CA of the `<name>-tls` Secret. The host reaches the Service's
/// cluster IP through kube-proxy's rules on the real node.
fn try_the_service(kubeconfig: &std::path::Path, namespace: &str, name: &str) -> String {
    let samples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("samples");
    let samples = samples.canonicalize().unwrap_or(samples);
    format!(
        r#"
Upload sample inferences and read their statistical parity difference back (SPD -0.3: 5/10 of
gender 0 against 8/10 of gender 1 get income 1), through the authenticated Service:

  export KUBECONFIG={kc}
  kubectl -n {ns} create serviceaccount trustyai-client
  kubectl -n {ns} create role trustyai-client --verb=get --resource=services --resource-name={name}
  kubectl -n {ns} create rolebinding trustyai-client --role=trustyai-client --serviceaccount={ns}:trustyai-client
  kubectl -n {ns} get secret {name}-tls -o jsonpath='{{.data.ca\.crt}}' | base64 -d > /tmp/{name}-ca.crt
  TOKEN=$(kubectl -n {ns} create token trustyai-client)
  IP=$(kubectl -n {ns} get service {name}-tls -o jsonpath='{{.spec.clusterIP}}')
  trustyai() {{ curl -sS --cacert /tmp/{name}-ca.crt --resolve {name}-tls.{ns}.svc:443:$IP -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" "https://{name}-tls.{ns}.svc$@"; echo; }}
  trustyai /data/upload -d @{samples}/demo-model-upload.json
  trustyai /metrics/group/fairness/spd -d @{samples}/demo-model-spd.json
"#,
        kc = kubeconfig.display(),
        ns = namespace,
        samples = samples.display(),
    )
}

/// Whether every TrustyAIService in `namespace` has `Ready=True` (and there is at least one).
fn samples_ready(kubeconfig: &std::path::Path, namespace: &str) -> bool {
    get_services(
        kubeconfig,
        namespace,
        r#"{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
    )
    .is_ok_and(|out| {
        let states: Vec<&str> = out.lines().collect();
        !states.is_empty() && states.iter().all(|s| *s == "True")
    })
}

/// The local control plane has no storage provisioner; play one: a PersistentVolume on a
/// folder of the control plane's (removed with it, writable by the service's user) pre-bound
/// to the claim `<name>-pvc` of every TrustyAIService in `namespace`.
fn provide_volumes(cp: &ControlPlane, namespace: &str) {
    use std::os::unix::fs::PermissionsExt;
    let names = match sample_names(&cp.kubeconfig, namespace) {
        Ok(names) => names,
        Err(e) => {
            eprintln!("listing the samples failed: {e}");
            return;
        }
    };
    for name in &names {
        let claim = format!("{name}-pvc");
        let folder = cp.dir.join("volumes").join(format!("{namespace}-{claim}"));
        let made = std::fs::create_dir_all(&folder).and_then(|()| {
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777))
        });
        if let Err(e) = made {
            eprintln!("making {} failed: {e}", folder.display());
            return;
        }
        let pv = serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": format!("{namespace}-{claim}")},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": folder, "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": claim},
            }
        });
        let file = cp.dir.join(format!("pv-{namespace}-{claim}.json"));
        let applied = std::fs::write(&file, pv.to_string())
            .map_err(|e| e.to_string())
            .and_then(|()| {
                kubectl(
                    &cp.kubeconfig,
                    &["apply", "-f", &file.display().to_string()],
                )
            });
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
