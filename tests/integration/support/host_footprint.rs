//! What the tests must not leave on the host: the paths outside every working folder that a
//! control plane, a node or their clients write by default, and the host's network and kernel
//! settings a real node changes. A snapshot of them is taken before the first control plane of
//! this test binary starts ([`before_any_control_plane`]); the `host_footprint` test compares
//! the host with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Paths the components write unless told otherwise: the controller-manager's and the kubelet's
/// volume-plugin folder, the API server's default certificate folder, the kubelet's root and
/// log folders, CNI's results and configuration, containerd's default root and state, kubectl's
/// cache and helm's folders in the home directory.
const WATCHED: &[&str] = &[
    "/usr/libexec/kubernetes",
    "/var/run/kubernetes",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/etc/cni/net.d",
    "/var/lib/containerd",
    "/run/containerd",
    "/etc/kubernetes",
    "~/.kube",
    "~/.cache/helm",
    "~/.config/helm",
    "~/.local/share/helm",
];

/// The host's settings a real node changes while it runs, each read by a command.
const SETTINGS: &[(&str, &[&str])] = &[
    ("addresses", &["ip", "-o", "addr", "show"]),
    ("links", &["ip", "-o", "link", "show"]),
    ("routes", &["ip", "route", "show", "table", "all"]),
    ("nftables ruleset", &["nft", "list", "ruleset"]),
    ("network namespaces", &["ip", "netns", "list"]),
    (
        "kernel settings",
        &[
            "sysctl",
            "kernel.panic",
            "kernel.panic_on_oops",
            "vm.overcommit_memory",
            "net.ipv4.ip_forward",
        ],
    ),
];

/// How many entries below one watched path a snapshot lists at most.
const MAX_ENTRIES: usize = 5_000;

/// Each watched path: absent (`None`), or what is below it, by relative path (kind, size,
/// mtime); and each setting's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    paths: BTreeMap<PathBuf, Option<BTreeMap<PathBuf, String>>>,
    settings: BTreeMap<&'static str, String>,
}

/// The cgroup folder containerd makes for its namespace under each controller.
fn cgroup_paths() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|entries| entries.flatten().map(|e| e.path().join("k8s.io")).collect())
        .unwrap_or_default()
}

fn setting(command: &[&str]) -> String {
    match std::process::Command::new(command[0])
        .args(&command[1..])
        .output()
    {
        Ok(out) => format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => format!("({} could not run: {e})", command[0]),
    }
}

fn expand(path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"))
            .join(rest),
        None => PathBuf::from(path),
    }
}

fn describe(path: &Path) -> String {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => "dir".into(),
        Ok(meta) => {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            format!(
                "{:?} {} bytes, modified {mtime}",
                meta.file_type(),
                meta.len()
            )
        }
        Err(e) => format!("unreadable: {e}"),
    }
}

fn listing(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            if entries.len() >= MAX_ENTRIES {
                return entries;
            }
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            entries.insert(relative, describe(&path));
        }
    }
    entries
}

impl Snapshot {
    pub fn take() -> Snapshot {
        Snapshot {
            paths: WATCHED
                .iter()
                .map(|path| expand(path))
                .chain(cgroup_paths())
                .map(|path| {
                    let below = path.exists().then(|| listing(&path));
                    (path, below)
                })
                .collect(),
            settings: SETTINGS
                .iter()
                .map(|(name, command)| (*name, setting(command)))
                .collect(),
        }
    }

    /// What differs in `now`: a path that was absent and is there, or one that was there and
    /// is gone or changed below.
    pub fn differences(&self, now: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (name, before) in &self.settings {
            let after = now
                .settings
                .get(name)
                .map(String::as_str)
                .unwrap_or_default();
            if before != after {
                out.push(format!(
                    "the {name} changed:\nbefore:\n{before}\nnow:\n{after}"
                ));
            }
        }
        for (path, before) in &self.paths {
            let after = now.paths.get(path).cloned().flatten();
            match (before, after) {
                (None, None) => {}
                (None, Some(below)) => out.push(format!(
                    "{} was created (below it: {:?})",
                    path.display(),
                    below.keys().take(20).collect::<Vec<_>>()
                )),
                (Some(_), None) => out.push(format!("{} was there and is gone", path.display())),
                (Some(before), Some(after)) if *before != after => {
                    let changed: Vec<_> = before
                        .keys()
                        .chain(after.keys())
                        .filter(|k| before.get(*k) != after.get(*k))
                        .take(20)
                        .collect();
                    out.push(format!("{} changed below: {changed:?}", path.display()));
                }
                (Some(_), Some(_)) => {}
            }
        }
        out
    }
}

static BEFORE: OnceLock<Snapshot> = OnceLock::new();

/// The snapshot taken before this test binary's first control plane started (taken now if
/// none has started yet), once no real node of an earlier run is still being undone.
pub fn before_any_control_plane() -> &'static Snapshot {
    BEFORE.get_or_init(|| {
        if let Err(e) = trustyai_local_cluster::real_node::wait_until_released(
            std::time::Duration::from_secs(120),
        ) {
            panic!("the host is not at rest: {e}");
        }
        Snapshot::take()
    })
}
