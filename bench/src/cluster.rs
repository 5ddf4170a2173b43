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
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{Api, ListParams, ObjectList, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde_json::json;
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
    /// Namespaces they were spread over (TrustyAIService i in namespace i % namespaces), each
    /// with its own credentials Secret.
    pub namespaces: usize,
    /// `spec.replicas` of every TrustyAIService; `None`: left unset (the default, 1).
    pub replicas: Option<i32>,
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
    trustyai_local_cluster::free_port().map_err(|e| anyhow::anyhow!(e))
}

/// Objects per page of the harness's lists: a list of 10,000 TrustyAIServices in one answer
/// would make the API server build it whole in memory.
const PAGE: u32 = 500;

/// Every item of a list, page by page; `list` fetches one page.
async fn list_pages<T, F, Fut>(mut list: F) -> kube::Result<Vec<T>>
where
    T: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: std::future::Future<Output = kube::Result<ObjectList<T>>>,
{
    let mut params = ListParams::default().limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = list(params.clone()).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// Every TrustyAIService of the cluster.
async fn trustyai_services(client: &Client) -> kube::Result<Vec<TrustyAIService>> {
    let api = Api::<TrustyAIService>::all(client.clone());
    list_pages(|p| {
        let api = api.clone();
        async move { api.list(&p).await }
    })
    .await
}

/// The owners' UIDs of every object of kind `K` in the cluster, one per owner reference (of the
/// objects only the metadata is read).
async fn owner_uids<K>(client: &Client) -> kube::Result<Vec<String>>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let objects = list_pages(|p| {
        let api = api.clone();
        async move { api.list_metadata(&p).await }
    })
    .await?;
    let references = objects.iter().flat_map(|o| o.owner_references());
    Ok(references.map(|r| r.uid.clone()).collect())
}

/// The TrustyAIServices of the cluster that have their children and a current
/// observedGeneration, and those that are Ready. Cluster-wide lists (the harness's own
/// requests, which do not go through the counting proxy): one list per kind, whatever the
/// number of namespaces. Only the TrustyAIServices are read whole (their status); of the
/// Deployments and Services only the metadata.
async fn progress(client: &Client) -> Result<(usize, usize)> {
    let services = trustyai_services(client).await?;
    let mut owned: HashMap<String, (usize, usize)> = HashMap::new();
    for uid in owner_uids::<Deployment>(client).await? {
        owned.entry(uid).or_default().0 += 1;
    }
    for uid in owner_uids::<Service>(client).await? {
        owned.entry(uid).or_default().1 += 1;
    }
    Ok(tally(&services, &owned))
}

/// The route.openshift.io Routes the operator makes and the stand-in router admits.
fn route_resource() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    )
}

/// Up to `limit` TrustyAIServices that are not Ready, each described by [`describe`], so a
/// run that misses Ready tells whether the operator's view (its `Ready` message) or the
/// cluster (the Deployment, the Route) is behind.
async fn not_ready(client: &Client, limit: usize) -> Result<Vec<String>> {
    let services = trustyai_services(client).await?;
    let mut out = Vec::new();
    for service in services
        .iter()
        .filter(|t| t.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Ready"))
        .take(limit)
    {
        let (ns, name) = (service.namespace().unwrap_or_default(), service.name_any());
        let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await?;
        let route = Api::<kube::api::DynamicObject>::namespaced_with(
            client.clone(),
            &ns,
            &route_resource(),
        )
        .get_opt(&name)
        .await?;
        out.push(describe(service, deployment.as_ref(), route.as_ref()));
    }
    Ok(out)
}

/// One line on a TrustyAIService that is not Ready: its phase and `Ready` message (the
/// operator's view), its Deployment's generation and `Available` condition, and whether its
/// Route is admitted (the cluster's).
fn describe(
    service: &TrustyAIService,
    deployment: Option<&Deployment>,
    route: Option<&kube::api::DynamicObject>,
) -> String {
    let status = service.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or("no Ready condition".to_owned(), |c| {
            format!(
                "Ready {} {}: {}",
                c.status,
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default()
            )
        });
    let deployment = deployment.map_or("no Deployment".to_owned(), |d| {
        let status = d.status.as_ref();
        let available = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_.as_deref() == Some("Available")))
            .and_then(|c| c.status.as_deref())
            .unwrap_or("unset");
        format!(
            "Deployment generation {} observed {}, Available {available}, {} of {} ready",
            d.metadata.generation.unwrap_or_default(),
            status
                .and_then(|s| s.observed_generation)
                .map_or("–".to_owned(), |g| g.to_string()),
            status.and_then(|s| s.ready_replicas).unwrap_or(0),
            d.spec.replicas.unwrap_or(1)
        )
    });
    let route = match route {
        None => "no Route",
        Some(r) if r.data["status"]["ingress"].is_array() => "Route admitted",
        Some(_) => "Route not admitted",
    };
    format!(
        "{}/{}: phase {}, observedGeneration {} of {}; {ready}; {deployment}; {route}",
        service.namespace().unwrap_or_default(),
        service.name_any(),
        status.and_then(|s| s.phase.as_deref()).unwrap_or("–"),
        status
            .and_then(|s| s.observed_generation)
            .map_or("–".to_owned(), |g| g.to_string()),
        service.metadata.generation.unwrap_or_default()
    )
}

/// How often progress is polled: every 0.5 s, and less often as N grows (N / 2,000 s, so
/// 5 s at 10,000), each poll listing every TrustyAIService, Deployment and Service.
fn poll_interval(n: usize) -> Duration {
    Duration::from_millis(500).max(Duration::from_secs_f64(n as f64 / 2000.0))
}

/// How long the TrustyAIServices may take to be reconciled before the run fails: 3 minutes
/// plus 1 s per TrustyAIService (N = 1,000 took 55–160 s on two cores).
fn reconcile_timeout(n: usize) -> Duration {
    Duration::from_secs(180 + n as u64)
}

/// The name of TrustyAIService `i`: five digits, so that names up to 99,999 sort in order.
fn tas_name(i: usize) -> String {
    format!("tas-{i:05}")
}

/// The names of `count` namespaces, zero-padded (at least 4 digits) so that they sort in
/// order.
fn namespace_names(count: usize) -> Vec<String> {
    let width = count.saturating_sub(1).to_string().len().max(4);
    (0..count)
        .map(|k| format!("bench-tas-{k:0width$}"))
        .collect()
}

/// Creates `object` through `api`, retrying what a busy API server answers (429 from its
/// priority and fairness, 5xx, a timeout); a conflict after a retry is the earlier attempt
/// having gone through.
async fn create<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Resource + Clone + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
{
    let mut wait = Duration::from_millis(250);
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if attempt > 1 && status.code == 409 => return Ok(()),
            Err(error) if attempt < 6 && retryable(&error) => {
                eprintln!(
                    "creating {}: {error} (attempt {attempt}; retrying)",
                    object.meta().name.as_deref().unwrap_or_default()
                );
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "creating {}",
                        object.meta().name.as_deref().unwrap_or_default()
                    )
                });
            }
        }
    }
}

/// Whether a failed request is worth repeating: the server was busy or the connection failed.
fn retryable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
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

/// Admits every Route of the cluster the way an OpenShift router does (status only), until
/// aborted: one cluster-wide watch, up to 8 admissions in flight. Its requests go through the
/// harness's client, not the counting proxy.
async fn admit_routes(client: Client) {
    use kube::api::{DynamicObject, Patch, PatchParams};
    use kube::runtime::{WatchStreamExt, watcher};
    let resource = route_resource();
    let routes: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    watcher(routes, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each_concurrent(8, |event| {
            let (client, resource) = (client.clone(), resource.clone());
            async move {
                let Ok(route) = event else { return };
                if route.data["status"]["ingress"].is_array() {
                    return;
                }
                let (Some(namespace), name) = (route.namespace(), route.name_any()) else {
                    return;
                };
                let routes: Api<DynamicObject> =
                    Api::namespaced_with(client, &namespace, &resource);
                let status = json!({"status": {"ingress": [{"host": format!("{name}.{namespace}.apps.example.com"),
                    "conditions": [{"type": "Admitted", "status": "True"}]}]}});
                // A router keeps trying; a Route left unadmitted would keep its
                // TrustyAIService from Ready and read as the operator's fault.
                let mut wait = Duration::from_millis(200);
                for attempt in 1..=5 {
                    match routes
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                        .await
                    {
                        Ok(_) => break,
                        Err(error) => {
                            eprintln!(
                                "stand-in router: admitting Route {namespace}/{name} failed (attempt {attempt}): {error}"
                            );
                            tokio::time::sleep(wait).await;
                            wait *= 2;
                        }
                    }
                }
            }
        })
        .await;
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

/// A TrustyAIService as the benchmark creates it: DATABASE mode with the `db-creds` Secret of
/// its namespace, and `spec.replicas` when `replicas` is given.
fn tas_object(name: &str, replicas: Option<i32>) -> Result<TrustyAIService> {
    let mut object = json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {"name": name},
        "spec": {
            "storage": {"format": "DATABASE", "databaseConfigurations": "db-creds"},
            "metrics": {"schedule": "1m"}
        }
    });
    if let Some(replicas) = replicas {
        object["spec"]["replicas"] = json!(replicas);
    }
    Ok(serde_json::from_value(object)?)
}

/// What the cluster benchmark creates and how long it rests.
#[derive(Debug, Clone)]
pub struct Plan {
    /// TrustyAIServices created at once.
    pub n: usize,
    /// Namespaces they are spread over (TrustyAIService i in namespace i % namespaces); at
    /// least 1.
    pub namespaces: usize,
    /// `spec.replicas` of every TrustyAIService; `None` leaves it unset.
    pub replicas: Option<i32>,
    /// Time at rest after reconciling.
    pub rest: Duration,
}

/// Runs the whole cluster benchmark as `plan` says.
pub fn run(operator_bin: &Path, plan: &Plan) -> Result<ClusterResults> {
    if plan.namespaces == 0 {
        bail!("the TrustyAIServices need at least one namespace");
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    eprintln!("starting the local control plane…");
    let cp = ControlPlane::start().map_err(|e| anyhow::anyhow!(e))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(run_on(&cp, operator_bin, plan));
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

async fn run_on(cp: &ControlPlane, operator_bin: &Path, plan: &Plan) -> Result<ClusterResults> {
    let (n, rest) = (plan.n, plan.rest);
    let client = cp.client().await;
    install_optional_crds(cp)?;
    let operator_ns = cp.namespace(&client, "bench-operator").await;

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
    while !trustyai_local_cluster::readyz_ok(ops_port, Duration::from_secs(2)).await {
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

    // The namespaces, 16 requests in flight (as every creation below).
    let namespaces = namespace_names(plan.namespaces);
    let namespace_api = Api::<Namespace>::all(client.clone());
    futures::stream::iter(&namespaces)
        .map(|name| {
            let api = &namespace_api;
            async move {
                let object = Namespace {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                create(api, &object).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;

    // The credentials every TrustyAIService names, one Secret per namespace, before them.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db-creds"},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "user", "databasePassword": "secret",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai"}
    }))?;
    futures::stream::iter(&namespaces)
        .map(|ns| {
            let (api, secret) = (Api::<Secret>::namespaced(client.clone(), ns), &secret);
            async move { create(&api, secret).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    if plan.namespaces > 1 {
        eprintln!(
            "created {} namespaces, each with its credentials Secret",
            plan.namespaces
        );
    }

    // A router, as OpenShift has: admits every Route (Ready waits for it).
    let router = tokio::spawn(admit_routes(client.clone()));

    // N at once.
    let before = counts.snapshot();
    let cpu_before = cpu_seconds(pid);
    let create_started = Instant::now();
    let apis: Vec<Api<TrustyAIService>> = namespaces
        .iter()
        .map(|ns| Api::namespaced(client.clone(), ns))
        .collect();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = &apis[i % apis.len()];
            async move {
                let object = tas_object(&tas_name(i), plan.replicas)?;
                create(api, &object).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    let create_seconds = create_started.elapsed().as_secs_f64();
    eprintln!(
        "created {n} TrustyAIServices in {} namespace(s) in {create_seconds:.1} s",
        plan.namespaces
    );

    let timeout = reconcile_timeout(n);
    let poll = poll_interval(n);
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
        // A list that fails (a busy API server) is tried again at the next poll, rather than
        // ending a long run; the timeout still bounds the wait.
        let (reconciled, ready) = match progress(&client).await {
            Ok(counts) => counts,
            Err(error) => {
                eprintln!("  listing the progress failed: {error:#}");
                tokio::time::sleep(poll).await;
                continue;
            }
        };
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
        tokio::time::sleep(poll).await;
    }
    if ready_at.is_none() {
        match not_ready(&client, 5).await {
            Ok(lines) => {
                eprintln!("not Ready (up to 5):");
                for line in lines {
                    eprintln!("  {line}");
                }
            }
            Err(error) => eprintln!("listing the TrustyAIServices not Ready failed: {error:#}"),
        }
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
            namespaces: plan.namespaces,
            replicas: plan.replicas,
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
        let mut object = serde_json::to_value(tas_object(uid, None).unwrap()).unwrap();
        object["metadata"]["uid"] = json!(uid);
        object["metadata"]["generation"] = json!(generation);
        if let Some(status) = status {
            object["status"] = status;
        }
        serde_json::from_value(object).unwrap()
    }

    /// A status that observed `generation`, in `phase`.
    fn observed(generation: i64, phase: &str) -> Option<serde_json::Value> {
        Some(json!({"observedGeneration": generation, "phase": phase}))
    }

    fn owned(entries: &[(&str, usize, usize)]) -> HashMap<String, (usize, usize)> {
        entries
            .iter()
            .map(|&(uid, d, s)| (uid.to_owned(), (d, s)))
            .collect()
    }

    #[test]
    fn only_a_current_status_with_every_child_counts_as_reconciled() {
        let services = [
            // Reconciled and Ready.
            tas("a", 2, observed(2, "Ready")),
            // Reconciled, not Ready yet.
            tas("b", 1, observed(1, "Not Ready")),
            // Ready from an older generation: not reconciled.
            tas("c", 3, observed(2, "Ready")),
            // No status at all.
            tas("d", 1, None),
            // Current, but only one of its two Services exists.
            tas("e", 1, observed(1, "Ready")),
            // Current, but no Deployment.
            tas("f", 1, observed(1, "Ready")),
            // Current with no children recorded at all.
            tas("g", 1, observed(1, "Ready")),
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
        let mut object = tas("a", 1, observed(1, "Ready"));
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
    fn a_trustyaiservice_of_zero_replicas_counts_like_any_other() {
        // `--replicas 0`: the Deployment exists with no pods and is Available, and the
        // operator reports Ready; the tally looks at the status and the children only.
        let mut object = serde_json::to_value(tas_object("z", Some(0)).unwrap()).unwrap();
        object["metadata"]["uid"] = json!("z");
        object["metadata"]["generation"] = json!(1);
        object["status"] =
            json!({"observedGeneration": 1, "phase": "Ready", "replicas": 0, "ready": "True"});
        let ready: TrustyAIService = serde_json::from_value(object).unwrap();
        assert_eq!(ready.spec.replicas, Some(0));
        assert_eq!(tally(&[ready], &owned(&[("z", 1, 2)])), (1, 1));
    }

    #[test]
    fn a_trustyaiservice_not_ready_is_described_with_its_children() {
        let service = tas(
            "a",
            1,
            Some(
                json!({"observedGeneration": 1, "phase": "Not Ready", "conditions": [
                {"type": "Ready", "status": "False", "reason": "ComponentsNotReady",
                 "message": "the Deployment has 0 of 1 replicas ready"}]}),
            ),
        );
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "a", "generation": 2},
            "spec": {"replicas": 0, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2,
                       "conditions": [{"type": "Available", "status": "True"}]}
        }))
        .unwrap();
        let route: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "route.openshift.io/v1", "kind": "Route",
            "metadata": {"name": "a"}, "status": {"ingress": []}
        }))
        .unwrap();
        assert_eq!(
            describe(&service, Some(&deployment), Some(&route)),
            "/a: phase Not Ready, observedGeneration 1 of 1; Ready False ComponentsNotReady: the Deployment has 0 of 1 replicas ready; Deployment generation 2 observed 2, Available True, 0 of 0 ready; Route admitted"
        );
        assert_eq!(
            describe(&tas("b", 1, None), None, None),
            "/b: phase –, observedGeneration – of 1; no Ready condition; no Deployment; no Route"
        );
    }

    #[test]
    fn names_sort_in_creation_order() {
        assert_eq!(tas_name(7), "tas-00007");
        assert_eq!(tas_name(9_999), "tas-09999");
        let names: Vec<String> = (0..10_000).map(tas_name).collect();
        assert!(names.is_sorted());
        assert_eq!(namespace_names(1), ["bench-tas-0000"]);
        let namespaces = namespace_names(1_000);
        assert_eq!(namespaces.len(), 1_000);
        assert_eq!(namespaces[999], "bench-tas-0999");
        assert!(namespaces.is_sorted());
        assert_eq!(namespace_names(10_001)[10_000], "bench-tas-10000");
        assert!(namespace_names(0).is_empty());
    }

    #[test]
    fn polling_slows_down_as_n_grows() {
        assert_eq!(poll_interval(0), Duration::from_millis(500));
        assert_eq!(poll_interval(100), Duration::from_millis(500));
        assert_eq!(poll_interval(1_000), Duration::from_millis(500));
        assert_eq!(poll_interval(2_000), Duration::from_secs(1));
        assert_eq!(poll_interval(10_000), Duration::from_secs(5));
        assert_eq!(reconcile_timeout(100), Duration::from_secs(280));
        assert_eq!(reconcile_timeout(10_000), Duration::from_secs(10_180));
    }

    #[test]
    fn replicas_are_set_only_when_asked() {
        let unset = serde_json::to_value(tas_object("a", None).unwrap()).unwrap();
        assert!(unset["spec"].get("replicas").is_none(), "{unset}");
        let zero = serde_json::to_value(tas_object("a", Some(0)).unwrap()).unwrap();
        assert_eq!(zero["spec"]["replicas"], 0);
    }

    #[test]
    fn only_a_busy_server_is_retried() {
        let status = |code: u16| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("x", "y").with_code(code),
            ))
        };
        assert!(retryable(&status(429)));
        assert!(retryable(&status(500)));
        assert!(retryable(&status(504)));
        assert!(!retryable(&status(409)));
        assert!(!retryable(&status(422)));
    }

    #[test]
    fn the_created_object_is_a_valid_database_trustyaiservice() {
        for replicas in [None, Some(0)] {
            a_valid_database_trustyaiservice(replicas);
        }
    }

    fn a_valid_database_trustyaiservice(replicas: Option<i32>) {
        let object = tas_object("tas-00007", replicas).unwrap();
        assert_eq!(object.metadata.name.as_deref(), Some("tas-00007"));
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
