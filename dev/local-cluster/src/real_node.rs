//! A real node beside the control plane: containerd (an instance of its own: socket, root and
//! state in the working folder), the kubelet, kube-proxy in iptables mode, a CNI bridge and
//! CoreDNS as the cluster's DNS, so pods really run their containers from images made here
//! ([`crate::images`]) and resolve `<service>.<namespace>.svc` as in any cluster.
//!
//! The host changes it needs (an address on `lo`, the bridge, a route, kernel settings, the
//! rules kube-proxy writes, paths the parts write whatever their configuration says) are made by
//! `scripts/real-node-host.sh`, which records each in a journal at a fixed path before making it.
//! A janitor on the control plane's pipe holds the machine's real-node lock for the node's life
//! and, when the pipe closes (a stop, or the test binary's end however it ends), undoes the
//! journal. A start first replays a journal a crashed run left.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::command::run;

/// The node's address, a /32 on `lo` (the kubelet refuses a loopback address). The API server
/// binds it too: pods reach it through the `kubernetes` Service.
pub const NODE_IP: &str = "10.87.0.1";
/// The cluster's DNS domain: a Service is `<name>.<namespace>.svc.cluster.local`.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// The node's name.
pub const NODE_NAME: &str = "trustyai-node";
/// The pods' addresses, on the bridge `trustyai0` (its address is the first).
pub const POD_CIDR: &str = "10.88.0.0/16";
const BRIDGE: &str = "trustyai0";
const BRIDGE_IP: &str = "10.88.0.1";

/// Where the host script keeps the journal and the lock (`/run`: gone with a reboot, as are the
/// changes it records).
const STATE_DIR: &str = "/run/trustyai-local-cluster";

/// Debian packages the node needs, by a file each installs.
const PACKAGES: &[(&str, &str)] = &[
    ("/usr/bin/containerd", "containerd"),
    ("/usr/bin/ctr", "containerd"),
    ("/usr/sbin/runc", "runc"),
    ("/usr/lib/cni/bridge", "containernetworking-plugins"),
    ("/usr/lib/cni/host-local", "containernetworking-plugins"),
    ("/usr/lib/cni/loopback", "containernetworking-plugins"),
    ("/usr/sbin/iptables", "iptables"),
    ("/usr/sbin/nft", "nftables"),
    ("/usr/sbin/conntrack", "conntrack"),
    ("/bin/busybox", "busybox-static"),
];

/// Why this machine cannot run a real node, if it cannot: not root, or a package missing.
pub fn unavailable() -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|uids| uids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    if !root {
        return Some("a real node needs root (addresses, a bridge, iptables rules, mounts)".into());
    }
    let mut missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(path, _)| !Path::new(path).exists())
        .map(|(_, package)| *package)
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        return Some(format!(
            "Debian packages missing: {} (`make prerequisites` as root installs them)",
            missing.join(" ")
        ));
    }
    None
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-node-host.sh")
}

/// Holds the machine's real-node lock until the control plane's pipe closes, then undoes the
/// journal and removes the working folder. Run by `sh -c`; `$1` is the host script, `$2` the
/// working folder, `$3` the lock file. It says `locked` once it holds the lock, or `busy`.
pub(crate) const NODE_JANITOR: &str = r#"trap '' INT TERM HUP
exec 9>"$3"
if ! flock -w 120 9; then echo busy; exit 75; fi
echo locked
read -r _
sleep 7
"$1" undo
rm -rf "$2""#;

/// Starts the node janitor (see [`NODE_JANITOR`]) with `command`'s stdin on the control plane's
/// pipe, and waits until it holds the lock.
pub(crate) fn janitor_command(dir: &Path) -> Result<Command, String> {
    std::fs::create_dir_all(STATE_DIR).map_err(|e| format!("creating {STATE_DIR}: {e}"))?;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(NODE_JANITOR)
        .arg("node-janitor")
        .arg(script())
        .arg(dir)
        .arg(Path::new(STATE_DIR).join("real-node.lock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    Ok(command)
}

/// Reads the janitor's first line: `Ok` once it holds the lock.
pub(crate) fn await_lock(stdout: std::process::ChildStdout) -> Result<(), String> {
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    match line.trim() {
        "locked" => Ok(()),
        _ => Err(format!(
            "another real node has held this machine's lock ({STATE_DIR}/real-node.lock) for 2 minutes"
        )),
    }
}

/// Waits until no real node holds the machine's lock: a stopped node's janitor holds it until it
/// has undone the host changes.
pub fn wait_until_released(timeout: std::time::Duration) -> Result<(), String> {
    let lock = Path::new(STATE_DIR).join("real-node.lock");
    if !lock.exists() {
        return Ok(());
    }
    run(
        Command::new("flock")
            .arg("-w")
            .arg(timeout.as_secs().to_string())
            .arg(&lock)
            .arg("true"),
        &format!(
            "waiting {timeout:?} for the real-node lock {}",
            lock.display()
        ),
    )
    .map(drop)
}

/// Makes the host changes (after undoing what a crashed run left).
pub(crate) fn set_up_host(dir: &Path) -> Result<(), String> {
    run(
        Command::new(script()).arg("setup").arg(dir),
        "preparing the host for a real node",
    )
    .map(drop)
}

/// The node's folders and files inside the control plane's working folder.
pub(crate) struct NodeFiles {
    pub corefile: PathBuf,
    pub containerd_config: PathBuf,
    pub containerd_socket: PathBuf,
    pub kubelet_config: PathBuf,
    pub kubelet_root: PathBuf,
    pub volume_plugins: PathBuf,
    pub kube_proxy_config: PathBuf,
}

/// Writes the configuration of containerd, the CNI bridge, the kubelet, kube-proxy and CoreDNS.
pub(crate) fn write_configs(
    dir: &Path,
    kubeconfig: &Path,
    ca_cert: &Path,
    pause_image: &str,
    ports: &NodePorts,
) -> Result<NodeFiles, String> {
    let node = dir.join("node");
    let containerd = node.join("containerd");
    let cni_conf = node.join("cni/net.d");
    for d in [
        &containerd,
        &cni_conf,
        &node.join("pod-logs"),
        &node.join("static-pods"),
    ] {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    let socket = containerd.join("containerd.sock");
    let containerd_config = containerd.join("config.toml");
    write(
        &containerd_config,
        format!(
            r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # Root here lacks CAP_SYS_RESOURCE: a sandbox's oom_score_adj of -998 cannot be set.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
"#,
            root = containerd.join("root").display(),
            state = containerd.join("state").display(),
            socket = socket.display(),
            opt = containerd.join("opt").display(),
            runc_root = containerd.join("runc").display(),
            cni_conf = cni_conf.display(),
        ),
    )?;
    // Pods get routes to the Services and the node only: nothing they send leaves the host.
    write(
        &cni_conf.join("10-trustyai.conflist"),
        serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "trustyai-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": BRIDGE_IP}]],
                        "routes": [
                            {"dst": crate::control_plane::SERVICE_CIDR},
                            {"dst": format!("{NODE_IP}/32")}
                        ],
                        "dataDir": node.join("cni/ipam").display().to_string()
                    }
                },
                {"type": "loopback"}
            ]
        })
        .to_string(),
    )?;
    let resolv = node.join("resolv.conf");
    write(&resolv, "nameserver 127.0.0.1\n".into())?;
    // Cluster DNS on the node's address (pods reach it by their route to the node), answering
    // for the cluster's names only: nothing is forwarded off the host.
    let corefile = node.join("Corefile");
    write(
        &corefile,
        format!(
            r#".:53 {{
    bind {NODE_IP}
    errors
    ready 127.0.0.1:{ready}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"#,
            ready = ports.dns_ready,
            kubeconfig = kubeconfig.display(),
        ),
    )?;
    let kubelet_config = node.join("kubelet.yaml");
    write(
        &kubelet_config,
        format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {kubelet_port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
podLogsDir: {pod_logs}
staticPodPath: {static_pods}
resolvConf: {resolv}
clusterDomain: {CLUSTER_DOMAIN}
clusterDNS: ["{NODE_IP}"]
serializeImagePulls: false
maxPods: 110
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: false
makeIPTablesUtilChains: false
"#,
            kubelet_port = ports.kubelet,
            healthz_port = ports.kubelet_healthz,
            ca = ca_cert.display(),
            socket = socket.display(),
            pod_logs = node.join("pod-logs").display(),
            static_pods = node.join("static-pods").display(),
            resolv = resolv.display(),
        ),
    )?;
    let kube_proxy_config = node.join("kube-proxy.yaml");
    write(
        &kube_proxy_config,
        format!(
            r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
hostnameOverride: {NODE_NAME}
mode: iptables
clusterCIDR: {POD_CIDR}
bindAddress: {NODE_IP}
healthzBindAddress: 127.0.0.1:{healthz}
metricsBindAddress: 127.0.0.1:{metrics}
nodePortAddresses: ["{NODE_IP}/32"]
iptables:
  # Service traffic leaves the host with the bridge's address, so the answers come back
  # through the host's connection tracking (no bridge netfilter needed).
  masqueradeAll: true
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
            kubeconfig = kubeconfig.display(),
            healthz = ports.kube_proxy_healthz,
            metrics = ports.kube_proxy_metrics,
        ),
    )?;
    Ok(NodeFiles {
        corefile,
        containerd_config,
        containerd_socket: socket,
        kubelet_config,
        kubelet_root: node.join("kubelet"),
        volume_plugins: node.join("volume-plugins"),
        kube_proxy_config,
    })
}

/// The node's ports: the kubelet's is fixed by the API server's way to reach it (the Node's
/// address and port); the others are free loopback ports.
pub(crate) struct NodePorts {
    pub kubelet: u16,
    pub kubelet_healthz: u16,
    pub kube_proxy_healthz: u16,
    pub kube_proxy_metrics: u16,
    /// CoreDNS's readiness endpoint (`/ready`) on 127.0.0.1.
    pub dns_ready: u16,
}

/// `ctr` against the node's containerd, in the namespace the kubelet uses.
fn ctr(socket: &Path) -> Command {
    let mut command = Command::new("ctr");
    command
        .arg("--address")
        .arg(socket)
        .args(["--namespace", "k8s.io"]);
    command
}

/// The host pid of containerd's running task `id` (`ctr tasks ls`: TASK PID STATUS).
pub fn task_pid(socket: &Path, id: &str) -> Result<u32, String> {
    let text = run(
        ctr(socket).args(["tasks", "ls"]),
        "listing containerd's tasks",
    )?;
    text.lines()
        .find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [task, pid, "RUNNING"] if *task == id => pid.parse().ok(),
                _ => None,
            }
        })
        .ok_or_else(|| format!("no running task {id} in containerd:\n{text}"))
}

/// Imports the image archive at `archive` into the node's containerd (unpacked by the CRI
/// plugin when a container first uses it).
/// Gives the image `source` in the node's store the further name `target` (same content).
pub fn tag_image(socket: &Path, source: &str, target: &str) -> Result<(), String> {
    run(
        ctr(socket).args(["images", "tag", "--force", source, target]),
        &format!("tagging {source} as {target}"),
    )
    .map(drop)
}

pub fn import_image(socket: &Path, archive: &Path) -> Result<(), String> {
    run(
        ctr(socket)
            .args(["images", "import", "--no-unpack"])
            .arg(archive),
        &format!("importing {}", archive.display()),
    )
    .map(drop)
}
