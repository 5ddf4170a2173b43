//! The operator binary against the local control plane: start-up time, the time and API
//! requests to reconcile N TrustyAIServices created at once, the requests at rest afterwards,
//! and the operator's memory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use trustyai_crds::TrustyAIService;
use trustyai_local_cluster::ControlPlane;

use crate::http_load::proc_status_kib;
use crate::proxy::{self, difference, is_write, total};

#[derive(Debug, Clone, Serialize)]
pub struct Startup {
    /// Process start to the first `ConversionReview` answered over TLS.
    pub to_convert_ms: f64,
    /// Process start to `/readyz` 200 (TLS loaded, caBundle published).
    pub to_readyz_ms: f64,
    /// API requests the operator made from start until ready.
    pub api_requests_until_ready: u64,
    /// API requests from start until idle (ready, then 5 s with no TrustyAIService), by verb
    /// and resource.
    pub api_requests_until_idle: u64,
    pub until_idle_by_verb_resource: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reconcile {
    pub trustyaiservices: usize,
    /// Time to create them all (16 requests in flight, through the admission webhooks).
    pub create_seconds: f64,
    /// From the first create until every one has its Deployment, its 2 Services and
    /// `status.observedGeneration == metadata.generation`.
    pub seconds_until_all_reconciled: f64,
    /// From the first create until every one reports `phase: Ready` (Deployment available).
    pub seconds_until_all_ready: Option<f64>,
    /// API requests of the operator from the first create until all were Ready and 10 s passed.
    pub api_requests: u64,
    pub api_writes: u64,
    pub api_requests_per_trustyaiservice: f64,
    pub api_writes_per_trustyaiservice: f64,
    /// The operator's CPU time (user + system) from the first create until all were Ready
    /// and 10 s passed, per TrustyAIService.
    pub cpu_seconds_per_trustyaiservice: Option<f64>,
    pub by_verb_resource: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AtRest {
    pub seconds: f64,
    pub api_requests: u64,
    pub api_writes: u64,
    /// Writes other than the leader-election Lease renewals (a constant per operator, not per
    /// TrustyAIService).
    pub api_writes_excluding_lease: u64,
    pub requests_per_trustyaiservice_per_minute: f64,
    pub writes_per_trustyaiservice_per_minute: f64,
    pub writes_excluding_lease_per_trustyaiservice_per_minute: f64,
    pub by_verb_resource: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// Resident memory once ready, before any TrustyAIService exists (VmRSS), KiB.
    pub idle_rss_kib: Option<u64>,
    /// Peak resident memory over the whole run (VmHWM), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Resident memory at the end of the rest period (VmRSS), KiB.
    pub steady_rss_kib: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClusterResults {
    pub operator_binary: String,
    pub startup: Startup,
    pub reconcile: Reconcile,
    pub at_rest: AtRest,
    pub memory: Memory,
}

struct OperatorProcess {
    child: Child,
}

impl OperatorProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        if self.running() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            for _ in 0..150 {
                if !self.running() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn readyz(port: u16) -> bool {
    let check = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await.ok()?;
        Some(text.starts_with("HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), check).await,
        Ok(Some(true))
    )
}

/// The TrustyAIServices in `ns` that have their children and a current observedGeneration,
/// and those that are Ready.
async fn progress(client: &Client, ns: &str) -> Result<(usize, usize)> {
    let list = ListParams::default();
    let services: Vec<TrustyAIService> =
        Api::namespaced(client.clone(), ns).list(&list).await?.items;
    let mut owned: HashMap<String, (usize, usize)> = HashMap::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list_metadata(&list)
        .await?
        .items
    {
        for r in d.owner_references() {
            owned.entry(r.uid.clone()).or_default().0 += 1;
        }
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list_metadata(&list)
        .await?
        .items
    {
        for r in s.owner_references() {
            owned.entry(r.uid.clone()).or_default().1 += 1;
        }
    }
    Ok(tally(&services, &owned))
}

/// How many of `services` are reconciled (a `status.observedGeneration` equal to
/// `metadata.generation`, and at least one Deployment and two Services owned), and how many of
/// those report `phase: Ready`. `owned` maps an owner UID to the Deployments and Services that
/// name it in their owner references.
fn tally(services: &[TrustyAIService], owned: &HashMap<String, (usize, usize)>) -> (usize, usize) {
    let mut reconciled = 0;
    let mut ready = 0;
    for tas in services {
        let status = tas.status.as_ref();
        let current = status.and_then(|s| s.observed_generation).is_some()
            && status.and_then(|s| s.observed_generation) == tas.metadata.generation;
        let children = tas
            .metadata
            .uid
            .as_ref()
            .and_then(|uid| owned.get(uid))
            .is_some_and(|&(d, s)| d >= 1 && s >= 2);
        if current && children {
            reconciled += 1;
            if status.and_then(|s| s.phase.as_deref()) == Some("Ready") {
                ready += 1;
            }
        }
    }
    (reconciled, ready)
}

/// `count` per TrustyAIService; 0 when there are none (`--n 0`), instead of NaN.
pub fn per_trustyaiservice(count: u64, n: usize) -> f64 {
    if n == 0 { 0.0 } else { count as f64 / n as f64 }
}

/// `count` per TrustyAIService per minute over `seconds`; 0 when there are no
/// TrustyAIServices or no time passed, instead of NaN or infinity.
pub fn per_trustyaiservice_per_minute(count: u64, n: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        per_trustyaiservice(count, n) / (seconds / 60.0)
    } else {
        0.0
    }
}

/// The optional APIs a real cluster has (OpenShift Routes, the Prometheus Operator's
/// ServiceMonitors, KServe InferenceServices): the operator then makes and watches Routes and
/// ServiceMonitors and wires InferenceServices, as in production.
const OPTIONAL_CRDS: [&str; 3] = [
    "tests/fixtures/crds/route.yaml",
    "tests/fixtures/crds/servicemonitor.yaml",
    "tests/fixtures/crds/inferenceservice.yaml",
];

fn install_optional_crds(cp: &ControlPlane) -> Result<()> {
    cp.install_crds(
        &OPTIONAL_CRDS,
        &[
            "routes.route.openshift.io",
            "servicemonitors.monitoring.coreos.com",
            "inferenceservices.serving.kserve.io",
        ],
    )
    .map_err(anyhow::Error::msg)
}

/// Admits every Route of `namespace` the way an OpenShift router does (status only), until
/// aborted. Its requests go through the harness's client, not the counting proxy.
async fn admit_routes(client: Client, namespace: String) {
    use kube::api::{DynamicObject, Patch, PatchParams};
    use kube::core::{ApiResource, GroupVersionKind};
    use kube::runtime::{WatchStreamExt, watcher};
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    );
    let routes: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &resource);
    let mut events = std::pin::pin!(
        watcher(routes.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        let Ok(route) = event else { continue };
        if route.data["status"]["ingress"].is_array() {
            continue;
        }
        let status = json!({"status": {"ingress": [{"host": format!("{}.apps.example.com", route.name_any()),
            "conditions": [{"type": "Admitted", "status": "True"}]}]}});
        // A router keeps trying; a Route left unadmitted would keep its TrustyAIService
        // from Ready and read as the operator's fault.
        let mut wait = std::time::Duration::from_millis(200);
        for attempt in 1..=5 {
            match routes
                .patch_status(
                    &route.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
            {
                Ok(_) => break,
                Err(error) => {
                    eprintln!(
                        "stand-in router: admitting Route {} failed (attempt {attempt}): {error}",
                        route.name_any()
                    );
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
        }
    }
}

/// The CPU time (user + system) of process `pid` so far, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields count from the last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Linux reports clock ticks; USER_HZ is 100 on every architecture it supports.
    Some((utime + stime) / 100.0)
}

fn tas_object(name: &str) -> Result<TrustyAIService> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {"name": name},
        "spec": {
            "storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
            "metrics": {"schedule": "1m"}
        }
    }))?)
}

/// Runs the whole cluster benchmark with `n` TrustyAIServices and `rest` seconds at rest.
pub fn run(operator_bin: &Path, n: usize, rest: Duration) -> Result<ClusterResults> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    eprintln!("starting the local control plane…");
    let cp = ControlPlane::start().map_err(|e| anyhow::anyhow!(e))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(run_on(&cp, operator_bin, n, rest));
    drop(runtime);
    let dir = cp.dir.clone();
    drop(cp);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        eprintln!("control-plane and operator logs kept in {}", dir.display());
    }
    result
}

async fn run_on(
    cp: &ControlPlane,
    operator_bin: &Path,
    n: usize,
    rest: Duration,
) -> Result<ClusterResults> {
    let client = cp.client().await;
    install_optional_crds(cp)?;
    let operator_ns = cp.namespace(&client, "bench-operator").await;
    let ns = cp.namespace(&client, "bench-tas").await;

    // The operator talks to the API server through the counting proxy.
    let (proxy_port, counts) = proxy::start(cp.client().await).await?;
    let kubeconfig = cp.dir.join("operator-kubeconfig");
    proxy::write_kubeconfig(&kubeconfig, proxy_port)?;

    let (webhook_port, ops_port) = (free_port()?, free_port()?);
    let log: PathBuf = cp.dir.join("logs").join("operator.log");
    let file = std::fs::File::create(&log)?;
    let started = Instant::now();
    let mut operator = OperatorProcess {
        child: Command::new(operator_bin)
            .arg("run")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", &operator_ns])
            .args([
                "--local-webhook-address",
                &format!("127.0.0.1:{webhook_port}"),
            ])
            .args(["--ops-address", &format!("127.0.0.1:{ops_port}")])
            .args(["--create-webhook-configurations", "--log-format", "json"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", operator_bin.display()))?,
    };
    let pid = operator.pid();

    // Start-up.
    crate::client::wait_for_convert(webhook_port, Duration::from_secs(60)).await?;
    let to_convert = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !readyz(ops_port).await {
        if !operator.running() || Instant::now() > deadline {
            bail!(
                "the operator did not become ready; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let to_readyz = started.elapsed();
    let api_requests_until_ready = total(&counts.snapshot(), |_| true);
    eprintln!(
        "operator: /convert after {:.0} ms, /readyz after {:.0} ms",
        to_convert.as_secs_f64() * 1e3,
        to_readyz.as_secs_f64() * 1e3
    );
    // Let the start-up work (CRD maintenance, storage migration, caches) finish.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_rss_kib = proc_status_kib(pid, "VmRSS");
    let until_idle_by_verb_resource = counts.snapshot();
    let api_requests_until_idle = total(&until_idle_by_verb_resource, |_| true);

    // The credentials every TrustyAIService names.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db-creds"},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "user", "databasePassword": "secret",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai"}
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await?;

    // A router, as OpenShift has: admits every Route (Ready waits for it).
    let router = tokio::spawn(admit_routes(client.clone(), ns.clone()));

    // N at once.
    let before = counts.snapshot();
    let cpu_before = cpu_seconds(pid);
    let create_started = Instant::now();
    let api: Api<TrustyAIService> = Api::namespaced(client.clone(), &ns);
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let object = tas_object(&format!("tas-{i:04}"))?;
                api.create(&PostParams::default(), &object).await?;
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    let create_seconds = create_started.elapsed().as_secs_f64();
    eprintln!("created {n} TrustyAIServices in {create_seconds:.1} s");

    let timeout = Duration::from_secs(180 + n as u64);
    let mut reconciled_at = None;
    let mut ready_at = None;
    let mut last_report = Instant::now();
    // Ready needs the simulated pods to run; wait for it at most a minute after reconciled.
    while ready_at.is_none()
        && create_started.elapsed() < timeout
        && reconciled_at
            .is_none_or(|at: Duration| create_started.elapsed() < at + Duration::from_secs(60))
    {
        if !operator.running() {
            bail!("the operator exited; log in {}", log.display());
        }
        let (reconciled, ready) = progress(&client, &ns).await?;
        if reconciled == n && reconciled_at.is_none() {
            reconciled_at = Some(create_started.elapsed());
            eprintln!(
                "all {n} reconciled after {:.1} s",
                create_started.elapsed().as_secs_f64()
            );
        }
        if ready == n {
            ready_at = Some(create_started.elapsed());
            eprintln!(
                "all {n} Ready after {:.1} s",
                create_started.elapsed().as_secs_f64()
            );
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("  {reconciled}/{n} reconciled, {ready}/{n} Ready");
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let Some(reconciled_at) = reconciled_at else {
        bail!(
            "not every TrustyAIService was reconciled within {timeout:?}; operator log in {}",
            log.display()
        );
    };
    // Follow-up reconciles (Deployment status changes) settle.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after = counts.snapshot();
    let cpu = cpu_seconds(pid)
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let reconcile_counts = difference(&after, &before);
    let requests = total(&reconcile_counts, |_| true);
    let writes = total(&reconcile_counts, is_write);

    // At rest.
    eprintln!("at rest for {} s…", rest.as_secs());
    let rest_started = Instant::now();
    tokio::time::sleep(rest).await;
    let rest_seconds = rest_started.elapsed().as_secs_f64();
    let rest_counts = difference(&counts.snapshot(), &after);
    let rest_requests = total(&rest_counts, |_| true);
    let rest_writes = total(&rest_counts, is_write);
    let rest_writes_no_lease = total(&rest_counts, |k| is_write(k) && !k.contains("leases"));
    let per_minute = |count: u64| per_trustyaiservice_per_minute(count, n, rest_seconds);
    let memory = Memory {
        idle_rss_kib,
        peak_rss_kib: proc_status_kib(pid, "VmHWM"),
        steady_rss_kib: proc_status_kib(pid, "VmRSS"),
    };
    drop(operator);
    router.abort();

    Ok(ClusterResults {
        operator_binary: operator_bin.display().to_string(),
        startup: Startup {
            to_convert_ms: to_convert.as_secs_f64() * 1e3,
            to_readyz_ms: to_readyz.as_secs_f64() * 1e3,
            api_requests_until_ready,
            api_requests_until_idle,
            until_idle_by_verb_resource,
        },
        reconcile: Reconcile {
            trustyaiservices: n,
            create_seconds,
            seconds_until_all_reconciled: reconciled_at.as_secs_f64(),
            seconds_until_all_ready: ready_at.map(|d| d.as_secs_f64()),
            api_requests: requests,
            api_writes: writes,
            api_requests_per_trustyaiservice: per_trustyaiservice(requests, n),
            api_writes_per_trustyaiservice: per_trustyaiservice(writes, n),
            cpu_seconds_per_trustyaiservice: cpu.map(|s| s / n.max(1) as f64),
            by_verb_resource: reconcile_counts,
        },
        at_rest: AtRest {
            seconds: rest_seconds,
            api_requests: rest_requests,
            api_writes: rest_writes,
            api_writes_excluding_lease: rest_writes_no_lease,
            requests_per_trustyaiservice_per_minute: per_minute(rest_requests),
            writes_per_trustyaiservice_per_minute: per_minute(rest_writes),
            writes_excluding_lease_per_trustyaiservice_per_minute: per_minute(rest_writes_no_lease),
            by_verb_resource: rest_counts,
        },
        memory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use trustyai_crds::defaults::{Operation, StorageMode, defaulted, storage_mode};
    use trustyai_crds::validation::{ValidationContext, validate};

    /// A TrustyAIService as the benchmark creates it, with a UID, a generation and a status.
    fn tas(uid: &str, generation: i64, status: Option<serde_json::Value>) -> TrustyAIService {
        let mut object = serde_json::to_value(tas_object(uid).unwrap()).unwrap();
        object["metadata"]["uid"] = json!(uid);
        object["metadata"]["generation"] = json!(generation);
        if let Some(status) = status {
            object["status"] = status;
        }
        serde_json::from_value(object).unwrap()
    }

    fn owned(entries: &[(&str, usize, usize)]) -> HashMap<String, (usize, usize)> {
        entries
            .iter()
            .map(|&(uid, d, s)| (uid.to_owned(), (d, s)))
            .collect()
    }

    #[test]
    fn reconciled_needs_current_generation_and_all_children() {
        let services = [
            // Reconciled and Ready.
            tas(
                "a",
                2,
                Some(json!({"observedGeneration": 2, "phase": "Ready"})),
            ),
            // Reconciled, not Ready yet.
            tas(
                "b",
                1,
                Some(json!({"observedGeneration": 1, "phase": "Not Ready"})),
            ),
            // Ready from an older generation: not reconciled.
            tas(
                "c",
                3,
                Some(json!({"observedGeneration": 2, "phase": "Ready"})),
            ),
            // No status at all.
            tas("d", 1, None),
            // Current, but only one of its two Services exists.
            tas(
                "e",
                1,
                Some(json!({"observedGeneration": 1, "phase": "Ready"})),
            ),
            // Current, but no Deployment.
            tas(
                "f",
                1,
                Some(json!({"observedGeneration": 1, "phase": "Ready"})),
            ),
            // Current with no children recorded at all.
            tas(
                "g",
                1,
                Some(json!({"observedGeneration": 1, "phase": "Ready"})),
            ),
        ];
        let owned = owned(&[
            ("a", 1, 2),
            ("b", 1, 3),
            ("c", 1, 2),
            ("d", 1, 2),
            ("e", 1, 1),
            ("f", 0, 2),
        ]);
        assert_eq!(tally(&services, &owned), (2, 1));
    }

    #[test]
    fn nothing_to_tally() {
        assert_eq!(tally(&[], &owned(&[("a", 1, 2)])), (0, 0));
    }

    #[test]
    fn an_object_without_a_generation_is_never_current() {
        let mut object = tas(
            "a",
            1,
            Some(json!({"observedGeneration": 1, "phase": "Ready"})),
        );
        object.metadata.generation = None;
        assert_eq!(tally(&[object], &owned(&[("a", 1, 2)])), (0, 0));
    }

    #[test]
    fn rates_per_trustyaiservice() {
        assert_eq!(per_trustyaiservice(250, 100), 2.5);
        assert_eq!(per_trustyaiservice(0, 100), 0.0);
        // 30 requests for 10 objects over 120 s: 3 per object in 2 minutes.
        assert_eq!(per_trustyaiservice_per_minute(30, 10, 120.0), 1.5);
        assert_eq!(per_trustyaiservice_per_minute(6, 1, 30.0), 12.0);
    }

    #[test]
    fn rates_over_nothing_are_zero_not_nan() {
        assert_eq!(per_trustyaiservice(5, 0), 0.0);
        assert_eq!(per_trustyaiservice_per_minute(5, 0, 60.0), 0.0);
        assert_eq!(per_trustyaiservice_per_minute(5, 10, 0.0), 0.0);
    }

    #[test]
    fn the_created_object_is_a_valid_database_trustyaiservice() {
        let object = tas_object("tas-0007").unwrap();
        assert_eq!(object.metadata.name.as_deref(), Some("tas-0007"));
        assert_eq!(object.spec.storage.format, "DATABASE");
        let mut value = serde_json::to_value(&object).unwrap();
        value["metadata"]["namespace"] = json!("bench-tas");
        assert_eq!(value["apiVersion"], "trustyai.opendatahub.io/v1");
        assert_eq!(storage_mode(&value["spec"]), Some(StorageMode::Database));
        // The admission webhooks default it, then validate it: it must pass, with the
        // credentials Secret (`db-creds`, created first) found.
        let full = defaulted(&value, Operation::Create);
        let looked_up = std::cell::RefCell::new(Vec::new());
        let exists = |name: &str| {
            looked_up.borrow_mut().push(name.to_owned());
            name == "db-creds"
        };
        let ctx = ValidationContext {
            allowed_image_prefixes: Vec::new(),
            secret_exists: Some(&exists),
        };
        let verdict = validate(&full, None, &ctx);
        assert!(verdict.is_allowed(), "{:?}", verdict.errors);
        assert!(verdict.warnings.is_empty(), "{:?}", verdict.warnings);
        assert_eq!(looked_up.into_inner(), ["db-creds"]);
    }
}
