//! One writer per claim, seen on the node: while a TrustyAIService's pod is replaced, no two
//! containers' TrustyAI service processes ever have its claim's volume mounted, and the data uploaded before
//! the replacement is read back after it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use super::release::installed_namespace;
use super::service::ready_pod;
use super::service_api::uploaded_pvc_demo;

/// The TrustyAI service processes on the node whose mounts include `volume` (its path below
/// the control plane's folder, as a mount's root names it whatever filesystem holds it), each
/// with the container it runs in ([`container_of`]): a process the service forks shows the
/// service's command line and mounts until it executes another program, so two processes of
/// one container are one writer, and two containers are two.
fn service_processes_on(volume: &str) -> BTreeMap<u32, String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("trustyai_service.main"))
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
                .is_ok_and(|m| m.contains(volume))
        })
        .filter_map(|pid| Some((pid, container_of(pid)?)))
        .collect()
}

/// The parent pid and the start time (clock ticks after boot) of process `pid`, from
/// `/proc/<pid>/stat`, whose second field (the command) may hold spaces and parentheses.
fn parent_and_start(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state): the parent pid is field 4, the start time field 22.
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The container process `pid` runs in, named by that container's first process (the child
/// of its `containerd-shim`): its pid and start time, which no later process shares. (A mount
/// namespace does not name a container: the kernel gives a new namespace the number a gone one
/// had, so a replacement container shows its predecessor's.)
fn container_of(pid: u32) -> Option<String> {
    let mut current = pid;
    for _ in 0..32 {
        let (parent, started) = parent_and_start(current)?;
        let parent_command = std::fs::read_to_string(format!("/proc/{parent}/comm")).ok()?;
        if parent_command.starts_with("containerd-shim") {
            return Some(format!("pid {current} started at tick {started}"));
        }
        if parent <= 1 {
            return None;
        }
        current = parent;
    }
    None
}

/// What a watch of the node's processes saw.
struct Seen {
    /// The most containers seen with the volume at once.
    most_at_once: usize,
    /// A sample with more than one, as `pid → container`, for the failure message.
    crowded: Option<BTreeMap<u32, String>>,
    every_container: BTreeSet<String>,
    samples: u64,
}

/// Reads the node's processes over and over until `stop`.
fn watch_processes(volume: String, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen {
        most_at_once: 0,
        crowded: None,
        every_container: BTreeSet::new(),
        samples: 0,
    };
    while !stop.load(Ordering::SeqCst) {
        let now = service_processes_on(&volume);
        let containers: BTreeSet<String> = now.values().cloned().collect();
        if containers.len() > seen.most_at_once {
            seen.most_at_once = containers.len();
            if containers.len() > 1 {
                seen.crowded = Some(now.clone());
            }
        }
        seen.every_container.extend(containers);
        seen.samples += 1;
        // A short pause leaves the node's two cores to the kubelet and the pods.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    seen
}

#[tokio::test]
async fn a_deleted_pods_replacement_starts_its_service_only_after_the_old_one_exited() {
    let (_claim, cp, client, ns) = installed_namespace(false, "single-writer").await;
    let (pod, user) = uploaded_pvc_demo(cp, &client, &ns).await;

    // The volume `pvc_service` gave the claim, as the node mounts it.
    let volume = format!("/volumes/{ns}-demo ");
    let before = service_processes_on(&volume);
    let containers_before: BTreeSet<&String> = before.values().collect();
    assert_eq!(
        containers_before.len(),
        1,
        "one service container on the volume: {before:?}"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (volume, stop) = (volume.clone(), stop.clone());
        std::thread::spawn(move || watch_processes(volume, stop))
    };

    let name = pod.metadata.name.clone().expect("a name");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let deleted = Instant::now();
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    ready_pod(cp, &pods, "demo", Some(&name)).await;
    let replaced_after = deleted.elapsed();
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.join().expect("the process watch");
    println!(
        "replacement Ready {replaced_after:?} after the deletion; {} samples of the node's processes",
        seen.samples
    );
    assert!(
        seen.every_container.len() >= 2,
        "the watch saw the old and the new container: {:?}",
        seen.every_container
    );
    assert_eq!(
        seen.most_at_once, 1,
        "two service containers had the volume at once (pid → container): {:?}",
        seen.crowded
    );

    // The data is still there.
    user.assert_spd().await;
}
