//! A real Kubernetes control plane on loopback, for the tests, `make run` and the benchmarks: etcd,
//! kube-apiserver, kube-controller-manager (garbage collector, namespace, deployment, replicaset
//! and the other default controllers), kube-scheduler, and kwok simulating one node so pods
//! "run" and Deployments become Available.
//!
//! Every process runs under a small shell guard that kills it when the starting process's end
//! of a pipe closes ([`ControlPlane::stop`], or that process's exit), so nothing outlives the
//! tests, also when a test panics or the binary aborts; a janitor on the same pipe then removes
//! the working folder (set `TRUSTYAI_KEEP_CONTROL_PLANE` to keep it for a post-mortem).
//! Missing binaries fail loudly with the command that builds them.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::pki::{Pki, write_pki};

/// The control plane's processes (the node's depend on the node kind), each a binary of that
/// name logging to `logs/<name>.log`.
const CONTROL_PLANE: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];
/// Annotation kwok uses to pick the nodes it simulates.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// Name of the simulated node.
pub const NODE_NAME: &str = "kwok-node-0";

/// Which node the control plane gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// kwok's: pods "run" (no container starts) and Deployments become Available; any number
    /// of these control planes run at once.
    Simulated,
    /// A real kubelet with containerd, kube-proxy and a CNI bridge ([`crate::real_node`]): one
    /// per machine, as root, with the Debian packages `make prerequisites` installs.
    Real,
}

impl NodeKind {
    /// Real where the machine allows it, else simulated, with the reason.
    pub fn best_available() -> (NodeKind, Option<String>) {
        match crate::real_node::unavailable() {
            None => (NodeKind::Real, None),
            Some(why) => (NodeKind::Simulated, Some(why)),
        }
    }
}

/// How a control plane is started.
#[derive(Clone, Debug)]
pub struct Options {
    pub node: NodeKind,
    /// Added to kube-apiserver's flags (another API server than the usual, such as one with a
    /// feature gate off).
    pub apiserver_flags: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            node: NodeKind::Simulated,
            apiserver_flags: Vec::new(),
        }
    }
}

/// The Service ClusterIP range; its first address (`kubernetes.default`) is
/// [`crate::pki::KUBERNETES_SERVICE_IP`].
pub const SERVICE_CIDR: &str = "10.96.0.0/16";

/// Runs the command given as arguments, and kills it when stdin (the test binary's pipe)
/// reaches end-of-file. fd 3 keeps the pipe because asynchronous lists get /dev/null as stdin.
/// The killer ignores INT, TERM and HUP: Ctrl-C on `make run` (or `timeout`) signals the whole
/// process group, and a killer that died with it would leave a process stuck in its graceful
/// shutdown (kube-apiserver waiting for a dead etcd) without its KILL.
const GUARD: &str = r#"exec 3<&0
"$@" </dev/null &
child=$!
( trap '' INT TERM HUP; read -r _ <&3; kill -TERM "$child" 2>/dev/null; sleep 5; kill -KILL "$child" 2>/dev/null ) &
wait "$child""#;

/// Removes the working folder once the test binary's pipe closes and the guards above have
/// killed their processes (TERM, then KILL after 5 s). Without it every test binary left
/// ~150 MB (etcd preallocates its WAL) in the temp folder, until the disk filled up.
const JANITOR: &str = r#"trap '' INT TERM HUP; read -r _; sleep 7; rm -rf "$1""#;

/// Prefix of the working folders in the temp folder; the process id follows.
const DIR_PREFIX: &str = "trustyai-control-plane-";

/// Set to keep the working folder (logs, etcd data) after the test binary exits.
pub const KEEP_ENV: &str = "TRUSTYAI_KEEP_CONTROL_PLANE";

/// A running control plane. Obtain it with [`ControlPlane::shared`].
pub struct ControlPlane {
    /// Working folder: PKI, kubeconfig, etcd data and one log file per process.
    pub dir: PathBuf,
    /// Admin kubeconfig for `kubectl` and clients.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// Folder of the control-plane binaries (also holds `helm`).
    pub bin: PathBuf,
    /// The cluster CA and the admin credentials.
    pub pki: Pki,
    /// Which node it has.
    pub node: NodeKind,
    /// The real node's containerd socket (images are imported through it).
    containerd_socket: Option<PathBuf>,
    etcd_url: String,
    guards: Mutex<Vec<Guarded>>,
}

/// A process started under [`GUARD`] or [`JANITOR`], and this process's end of its pipe.
struct Guarded {
    child: Child,
    pipe: ChildStdin,
    janitor: bool,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
static NAMESPACES: AtomicUsize = AtomicUsize::new(0);
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// The folder holding the control-plane binaries: `TRUSTYAI_CONTROL_PLANE_BIN`, or what
/// `dev/control-plane/build.sh --print` names.
pub fn bin_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("TRUSTYAI_CONTROL_PLANE_BIN")
        && !dir.is_empty()
    {
        return Ok(PathBuf::from(dir));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../control-plane/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("--print")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Path of one binary, or an error naming the command that builds it.
pub fn binary(name: &str) -> Result<PathBuf, String> {
    let dir = bin_dir()?;
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the control-plane binary {} is missing: build it with `make control-plane` \
             (dev/control-plane/build.sh); these tests never skip",
            path.display()
        ))
    }
}

/// Whether `GET /readyz` on `127.0.0.1:port` answers 200 within `within`: an operator's ops
/// server saying it is ready.
pub async fn readyz_ok(port: u16, within: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let check = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        Some(answer.starts_with(b"HTTP/1.1 200"))
    };
    matches!(tokio::time::timeout(within, check).await, Ok(Some(true)))
}

/// A loopback port that is free now and stays free for the component it is meant for: below the
/// kernel's ephemeral range (`net.ipv4.ip_local_port_range`), so no outgoing connection on the
/// machine can take it as its source port between this check and the component's bind (a port
/// the kernel picked for `:0` could, and a controller-manager then failed to start), and never
/// handed out twice by this process. Processes start at offsets of their own.
pub fn free_port() -> Result<u16, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32768);
    const FIRST: usize = 10_000;
    let span = low.saturating_sub(FIRST).max(1);
    let offset = (std::process::id() as usize).wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let port = FIRST + (offset + n) % span;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(format!("no free port between {FIRST} and {low}"))
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

impl ControlPlane {
    /// The control plane shared by every test of this test binary, started on first use.
    /// Panics (failing the test loudly) when it cannot start.
    pub fn shared() -> &'static ControlPlane {
        match SHARED.get_or_init(|| {
            // Start it on a thread of its own: the caller may be inside a Tokio runtime, and the
            // readiness checks use one of their own.
            std::thread::spawn(ControlPlane::start)
                .join()
                .unwrap_or_else(|_| Err("the control-plane start thread panicked".into()))
        }) {
            Ok(cp) => cp,
            Err(e) => panic!("local control plane unavailable: {e}"),
        }
    }

    /// Starts a control plane of its own (not the shared one). Blocking; call it outside an
    /// async context or on a thread of its own.
    pub fn start() -> Result<ControlPlane, String> {
        Self::start_with(Options::default())
    }

    /// [`Self::start`], with `flags` added to kube-apiserver's (another API server than the
    /// usual, such as one with a feature gate off).
    pub fn start_with_apiserver_flags(flags: &[&str]) -> Result<ControlPlane, String> {
        Self::start_with(Options {
            apiserver_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            ..Options::default()
        })
    }

    /// Starts a control plane of its own as `options` say. Blocking.
    pub fn start_with(options: Options) -> Result<ControlPlane, String> {
        // The clients here and the callers' share rustls' process-wide provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let real = options.node == NodeKind::Real;
        if real && let Some(why) = crate::real_node::unavailable() {
            return Err(format!("no real node on this machine: {why}"));
        }
        let bin = bin_dir()?;
        let node_binaries: &[&str] = if real {
            &["kubelet", "kube-proxy", "coredns"]
        } else {
            &["kwok", "kwok-stages.yaml"]
        };
        for name in CONTROL_PLANE.iter().chain(node_binaries) {
            binary(name)?;
        }
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| e.to_string())?;
        let pki = write_pki(&dir.join("pki")).map_err(|e| format!("writing the PKI: {e}"))?;
        let apiserver_port = free_port()?;
        let host = if real {
            crate::real_node::NODE_IP
        } else {
            "127.0.0.1"
        };
        let server = format!("https://{host}:{apiserver_port}");
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &server, &pki)
            .map_err(|e| format!("writing the kubeconfig: {e}"))?;

        let mut cp = ControlPlane {
            dir,
            kubeconfig,
            server,
            bin,
            pki,
            node: options.node,
            containerd_socket: None,
            etcd_url: String::new(),
            guards: Mutex::new(Vec::new()),
        };
        let started = Instant::now();
        if real {
            // Also removes the working folder, after undoing the host changes.
            cp.start_node_janitor()?;
            crate::real_node::set_up_host(&cp.dir)?;
        } else if std::env::var_os(KEEP_ENV).is_none() {
            cp.start_janitor()?;
        }
        cp.start_etcd()?;
        cp.start_apiserver(host, apiserver_port, &options.apiserver_flags)?;
        cp.wait_until(
            "kube-apiserver /readyz",
            Duration::from_secs(90),
            |client| async move {
                let req = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                client
                    .request_text(req)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )?;
        cp.start_controller_manager()?;
        cp.start_scheduler()?;
        if real {
            cp.start_real_node()?;
        } else {
            cp.start_kwok()?;
        }
        cp.wait_until(
            "the node and the default ServiceAccount",
            Duration::from_secs(90),
            |client| async move {
                if real {
                    node_ready(&client, crate::real_node::NODE_NAME).await?;
                } else {
                    ensure_node(&client).await?;
                }
                let sas: Api<ServiceAccount> = Api::namespaced(client, "default");
                sas.get("default")
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )?;
        eprintln!(
            "local control plane ready at {} in {:.1}s (kubeconfig {})",
            cp.server,
            started.elapsed().as_secs_f64(),
            cp.kubeconfig.display()
        );
        Ok(cp)
    }

    fn spawn(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        self.spawn_with_env(name, args, &[])
    }

    fn spawn_with_env(
        &mut self,
        name: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Result<(), String> {
        let log_path = self.dir.join("logs").join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("guard")
            .arg(self.program(name))
            .args(args)
            .envs(env.iter().copied())
            .stdout(log)
            .stderr(log_err);
        self.spawn_on_pipe(command, name)
    }

    /// A component's program: from the cache, or containerd from the host's packages.
    fn program(&self, name: &str) -> PathBuf {
        match name {
            "containerd" => PathBuf::from("/usr/bin/containerd"),
            _ => self.bin.join(name),
        }
    }

    /// The janitor of a real node: holds the machine's lock for the node's life, then undoes
    /// the host changes and removes the working folder.
    fn start_node_janitor(&mut self) -> Result<(), String> {
        let command = crate::real_node::janitor_command(&self.dir)?;
        self.spawn_on_pipe(command, "the real node's janitor")?;
        let guards = self.guards.get_mut().map_err(|e| e.to_string())?;
        let last = guards.last_mut().ok_or("no janitor")?;
        last.janitor = true;
        let stdout = last.child.stdout.take().ok_or("the janitor's stdout")?;
        crate::real_node::await_lock(stdout)
    }

    /// containerd, the kubelet and kube-proxy, after the API server.
    fn start_real_node(&mut self) -> Result<(), String> {
        let ports = crate::real_node::NodePorts {
            kubelet: 10250,
            kubelet_healthz: free_port()?,
            kube_proxy_healthz: free_port()?,
            kube_proxy_metrics: free_port()?,
            dns_ready: free_port()?,
        };
        let pause = crate::images::pause()?;
        let files = crate::real_node::write_configs(
            &self.dir,
            &self.kubeconfig,
            &self.pki.ca_cert,
            &pause.reference,
            &ports,
        )?;
        // A dead proxy: an image that was not imported fails at once instead of being looked
        // for in a registry.
        let dead_proxy = format!("http://127.0.0.1:{}", free_port()?);
        self.spawn_with_env(
            "containerd",
            &[format!("--config={}", files.containerd_config.display())],
            &[
                ("HTTP_PROXY", &dead_proxy),
                ("HTTPS_PROXY", &dead_proxy),
                ("NO_PROXY", ""),
            ],
        )?;
        self.wait_for("containerd listening", Duration::from_secs(30), || {
            files.containerd_socket.exists()
        })?;
        self.containerd_socket = Some(files.containerd_socket.clone());
        crate::real_node::import_image(&files.containerd_socket, &pause.archive)?;
        let args = vec![
            format!("--config={}", files.kubelet_config.display()),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--root-dir={}", files.kubelet_root.display()),
            format!("--cert-dir={}", files.kubelet_root.join("pki").display()),
            // A flag: in the configuration file it is ignored, and the default is on the host.
            format!("--volume-plugin-dir={}", files.volume_plugins.display()),
            format!("--hostname-override={}", crate::real_node::NODE_NAME),
            format!("--node-ip={}", crate::real_node::NODE_IP),
            "--v=1".into(),
        ];
        self.spawn("kubelet", &args)?;
        self.spawn(
            "kube-proxy",
            &[
                format!("--config={}", files.kube_proxy_config.display()),
                "--v=1".into(),
            ],
        )?;
        self.spawn(
            "coredns",
            &["-conf".into(), files.corefile.display().to_string()],
        )?;
        // Ready once its Kubernetes plugin has synced: a pod started after this resolves names.
        self.wait_for("CoreDNS ready", Duration::from_secs(60), || {
            http_ok(ports.dns_ready, "/ready")
        })
    }

    /// Waits until `done`, failing with the processes' logs when one of them exits first or
    /// `timeout` passes.
    fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut() -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while !done() {
            if let Some(exited) = self.exited_process() {
                return Err(format!("{exited} exited before {what}\n{}", self.logs()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not {what} within {} s\n{}",
                    timeout.as_secs(),
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// The host pid of the real node's container `id` (a pod status's `containerID` without
    /// `containerd://`), for reading what is in force in it from `/proc`.
    pub fn container_pid(&self, id: &str) -> Result<u32, String> {
        let socket = self
            .containerd_socket
            .as_ref()
            .ok_or("this control plane has no real node")?;
        crate::real_node::task_pid(socket, id)
    }

    /// Makes `image` available to the real node's pods (imported into its containerd).
    pub fn import_image(&self, image: &crate::images::Image) -> Result<(), String> {
        let socket = self
            .containerd_socket
            .as_ref()
            .ok_or("this control plane has no real node")?;
        crate::real_node::import_image(socket, &image.archive)
    }

    /// Gives the image `source`, imported into the real node, the further name `target`: a
    /// change of image for Kubernetes that runs the same content.
    pub fn tag_image(&self, source: &str, target: &str) -> Result<(), String> {
        let socket = self
            .containerd_socket
            .as_ref()
            .ok_or("this control plane has no real node")?;
        crate::real_node::tag_image(socket, source, target)
    }

    fn start_janitor(&mut self) -> Result<(), String> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(JANITOR)
            .arg("janitor")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.spawn_on_pipe(command, "the working-folder janitor")?;
        if let Some(last) = self.guards.get_mut().map_err(|e| e.to_string())?.last_mut() {
            last.janitor = true;
        }
        Ok(())
    }

    /// Spawns `command` with its stdin on a pipe this process keeps open until it exits.
    fn spawn_on_pipe(&mut self, mut command: Command, what: &str) -> Result<(), String> {
        let mut child = command
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {what}: {e}"))?;
        let pipe = child.stdin.take().ok_or("no stdin pipe")?;
        self.guards
            .get_mut()
            .map_err(|e| e.to_string())?
            .push(Guarded {
                child,
                pipe,
                janitor: false,
            });
        Ok(())
    }

    fn start_etcd(&mut self) -> Result<(), String> {
        let (client, peer) = (free_port()?, free_port()?);
        self.etcd_url = format!("http://127.0.0.1:{client}");
        let data = self.dir.join("etcd");
        let args = [
            "--name=default".to_string(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls=http://127.0.0.1:{client}"),
            format!("--advertise-client-urls=http://127.0.0.1:{client}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
            "--unsafe-no-fsync=true".into(),
            // 8 GiB instead of 2: the benchmark's scale run (10,000 TrustyAIServices, ~10
            // children each, their status history between compactions) must not hit the quota.
            // The file grows only as far as it is written.
            "--quota-backend-bytes=8589934592".into(),
            "--log-level=warn".into(),
        ];
        self.spawn("etcd", &args)
    }

    fn start_apiserver(&mut self, host: &str, port: u16, flags: &[String]) -> Result<(), String> {
        let p = &self.pki;
        let mut args = vec![
            format!("--etcd-servers={}", self.etcd_url),
            format!("--bind-address={host}"),
            format!("--advertise-address={host}"),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", self.dir.join("apiserver").display()),
            format!("--tls-cert-file={}", p.serving_cert.display()),
            format!("--tls-private-key-file={}", p.serving_key.display()),
            format!("--client-ca-file={}", p.ca_cert.display()),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", p.sa_pub.display()),
            format!("--service-account-signing-key-file={}", p.sa_key.display()),
            // A /16 (65,534 ClusterIPs): `make bench --n 1000` creates 2 Services per
            // TrustyAIService. Its first address is in the serving certificate (pki.rs).
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        if self.node == NodeKind::Real {
            // Pods reach it through the `kubernetes` Service, whose endpoint is the node's
            // address; it reaches the kubelet (logs, exec) as the admin.
            args.extend([
                format!("--kubelet-client-certificate={}", p.admin_cert.display()),
                format!("--kubelet-client-key={}", p.admin_key.display()),
                "--kubelet-preferred-address-types=InternalIP".into(),
            ]);
        } else {
            // A loopback advertise address needs no endpoint reconciler (as envtest does it).
            args.push("--endpoint-reconciler-type=none".into());
        }
        args.extend(flags.iter().cloned());
        self.spawn("kube-apiserver", &args)
    }

    /// Flags kube-controller-manager and kube-scheduler share: the admin kubeconfig for
    /// everything, no leader election, a free loopback port.
    fn component_args(&self) -> Result<Vec<String>, String> {
        Ok(vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--authentication-kubeconfig={}", self.kubeconfig.display()),
            format!("--authorization-kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--v=1".into(),
        ])
    }

    fn start_controller_manager(&mut self) -> Result<(), String> {
        let mut args = self.component_args()?;
        args.extend([
            format!(
                "--service-account-private-key-file={}",
                self.pki.sa_key.display()
            ),
            format!("--root-ca-file={}", self.pki.ca_cert.display()),
            format!("--cluster-signing-cert-file={}", self.pki.ca_cert.display()),
            format!("--cluster-signing-key-file={}", self.pki.ca_key.display()),
            "--use-service-account-credentials=false".into(),
            "--controllers=*".into(),
            "--concurrent-gc-syncs=5".into(),
            // Its default, /usr/libexec/kubernetes/kubelet-plugins/volume/exec, is created on
            // the host at start; in the working folder it goes away with the control plane.
            format!(
                "--flex-volume-plugin-dir={}",
                self.dir.join("flex-volume-plugins").display()
            ),
        ]);
        self.spawn("kube-controller-manager", &args)
    }

    fn start_scheduler(&mut self) -> Result<(), String> {
        let args = self.component_args()?;
        self.spawn("kube-scheduler", &args)
    }

    fn start_kwok(&mut self) -> Result<(), String> {
        let args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--manage-all-nodes=false".into(),
            format!("--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"),
            format!("--config={}", self.bin.join("kwok-stages.yaml").display()),
            "--node-lease-duration-seconds=40".into(),
            "--cidr=10.244.0.0/16".into(),
            "--node-ip=127.0.0.1".into(),
            format!("--server-address=127.0.0.1:{}", free_port()?),
        ];
        self.spawn("kwok", &args)
    }

    /// Polls `check` with a fresh client until it succeeds or `timeout` passes; on failure the
    /// error names what was awaited and shows the tail of every process log.
    fn wait_until<F, Fut>(&self, what: &str, timeout: Duration, check: F) -> Result<(), String>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(exited) = self.exited_process() {
                return Err(format!(
                    "{exited} exited while waiting for {what}\n{}",
                    self.logs()
                ));
            }
            let result = rt.block_on(async {
                let client = client_for(&self.kubeconfig).await?;
                check(client).await
            });
            match result {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!(
            "timed out after {timeout:?} waiting for {what}: {last}\n{}",
            self.logs()
        ))
    }

    fn exited_process(&self) -> Option<String> {
        let mut guards = self.guards.lock().ok()?;
        for Guarded { child, .. } in guards.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!(
                    "a control-plane process (pid {}, {status})",
                    child.id()
                ));
            }
        }
        None
    }

    /// Stops it as the end of the process would: closes every guard's pipe, then waits until
    /// the control-plane processes have exited (the janitor removes the working folder a few
    /// seconds later, reaped on a thread of its own). For a process that runs several control
    /// planes one after the other; using it afterwards fails.
    pub fn stop(&self) {
        let guards = std::mem::take(&mut *self.guards.lock().unwrap_or_else(|e| e.into_inner()));
        let mut children = Vec::new();
        for Guarded {
            child,
            pipe,
            janitor,
        } in guards
        {
            drop(pipe);
            if janitor {
                let mut janitor = child;
                std::thread::spawn(move || janitor.wait());
            } else {
                children.push(child);
            }
        }
        for mut child in children {
            let _ = child.wait();
        }
    }

    /// The last lines of every process log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let node: &[&str] = match self.node {
            NodeKind::Simulated => &["kwok"],
            NodeKind::Real => &["containerd", "kubelet", "kube-proxy", "coredns"],
        };
        for name in CONTROL_PLANE.iter().chain(node) {
            let path = self.dir.join("logs").join(format!("{name}.log"));
            out.push_str(&format!("--- {} ---\n{}\n", path.display(), tail(&path)));
        }
        out
    }

    /// A new admin client. Create one per test: a client belongs to the Tokio runtime it was
    /// created on, and every `#[tokio::test]` has its own.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("admin client: {e}"))
    }

    /// Creates a fresh namespace named after `prefix` and returns its name.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> String {
        let n = NAMESPACES.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        name
    }

    /// Applies the CRD manifests `files` (paths from the repository's root) and waits until
    /// the CRDs `names` are Established.
    pub fn install_crds(&self, files: &[&str], names: &[&str]) -> Result<(), String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in files {
            let path = root.join(file);
            let path = path.to_string_lossy();
            let (ok, out, err) = self.kubectl(&["apply", "-f", &path], None);
            if !ok {
                return Err(format!("kubectl apply {path}: {out}{err}"));
            }
        }
        let crds: Vec<String> = names.iter().map(|n| format!("crd/{n}")).collect();
        let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        args.extend(crds.iter().map(String::as_str));
        let (ok, out, err) = self.kubectl(&args, None);
        if ok {
            Ok(())
        } else {
            Err(format!("CRDs not established: {out}{err}"))
        }
    }

    /// Runs `kubectl` with the admin kubeconfig and returns (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg(kubectl_cache_dir(&self.kubeconfig))
            .args(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("kubectl is required: {e}"));
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .unwrap_or_else(|e| panic!("kubectl stdin: {e}"));
        }
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("kubectl: {e}"));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }
}

/// Removes working folders of test binaries that are gone (killed before their janitor could
/// run, or from before there was one). Folders of live processes are left alone.
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// kubectl's `--cache-dir` flag for a control plane's kubeconfig: beside it in the working
/// folder, so kubectl's discovery and HTTP caches go away with it (its default is ~/.kube/cache).
pub fn kubectl_cache_dir(kubeconfig: &Path) -> String {
    let dir = kubeconfig.parent().unwrap_or(Path::new("."));
    format!("--cache-dir={}", dir.join("kubectl-cache").display())
}

async fn client_for(kubeconfig: &Path) -> Result<Client, String> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> std::io::Result<()> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         users:\n- name: admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
         contexts:\n- name: local\n  context:\n    cluster: local\n    user: admin\n    namespace: default\ncurrent-context: local\n",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    );
    std::fs::write(path, text)
}

/// `Ok` once the node `name` is registered and Ready.
async fn node_ready(client: &Client, name: &str) -> Result<(), String> {
    let node = Api::<Node>::all(client.clone())
        .get(name)
        .await
        .map_err(|e| format!("node {name}: {e}"))?;
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        Ok(())
    } else {
        Err(format!("node {name} is not Ready yet"))
    }
}

/// Creates the node kwok simulates (idempotent).
async fn ensure_node(client: &Client) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes
        .get_opt(NODE_NAME)
        .await
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Ok(());
    }
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti", "pods": "1000"},
            "capacity": {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti", "pods": "1000"}
        }
    }))
    .map_err(|e| e.to_string())?;
    nodes
        .create(&PostParams::default(), &node)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Whether `GET http://127.0.0.1:<port><path>` answers 200.
fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let timeout = Duration::from_secs(2);
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        timeout,
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    if stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
}
