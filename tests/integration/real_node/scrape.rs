//! What Prometheus collects through the operator's ServiceMonitor: a scrape made with
//! Prometheus' own HTTP client (`promcheck fetch`), configured from exactly the
//! ServiceMonitor's endpoint (port, path, scheme, params, TLS CA and server name) as the
//! Prometheus Operator configures Prometheus from it, reads the real service's `trustyai_spd`.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use super::release::{TIMEOUT, installed, wait_for};
use super::service::pvc_service;
use super::service_api::{EXPECTED_SPD, User, spd_body};
use crate::support::wait;

const SERVICE_MONITOR_CRD: &str = "servicemonitors.monitoring.coreos.com";

/// The text of the key the endpoint's `tlsConfig.ca` names (a Secret's or a ConfigMap's).
async fn ca_text(client: &kube::Client, ns: &str, ca: &Value) -> Option<String> {
    if let Some(secret) = ca.get("secret") {
        let name = secret["name"].as_str()?;
        let data = Api::<Secret>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .ok()?
            .data?;
        let bytes = data.get(secret["key"].as_str()?)?;
        return Some(String::from_utf8_lossy(&bytes.0).to_string());
    }
    let config_map = ca.get("configMap")?;
    let data = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(config_map["name"].as_str()?)
        .await
        .ok()?
        .data?;
    data.get(config_map["key"].as_str()?).cloned()
}

/// The target port of the Service port named `port`, as Prometheus resolves an endpoint's
/// port name through the Service's EndpointSlices.
async fn target_port(client: &kube::Client, ns: &str, service: &str, port: &str) -> Option<i32> {
    let service = Api::<Service>::namespaced(client.clone(), ns)
        .get(service)
        .await
        .ok()?;
    let ports = service.spec?.ports?;
    let found = ports
        .into_iter()
        .find(|p| p.name.as_deref() == Some(port))?;
    match found.target_port? {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => Some(n),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(_) => None,
    }
}

#[tokio::test]
async fn the_service_monitor_endpoint_scrapes_trustyai_spd_with_prometheus_client() {
    let (_claim, cp) = installed(false).await;
    cp.install_crds(
        &["tests/fixtures/crds/servicemonitor.yaml"],
        &[SERVICE_MONITOR_CRD],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let client = cp.client().await;
    let ns = cp.namespace(&client, "scrape").await;
    let pod = pvc_service(cp, &client, &ns, "demo").await;

    // Data and a scheduled SPD request, as a user of the service's API makes them.
    let user = User::of_demo(&client, &ns).await;
    user.upload().await;
    user.post("/metrics/group/fairness/spd/request", &spd_body())
        .await;

    // The ServiceMonitor's endpoint, turned into a scrape job as the Prometheus Operator does.
    let monitors: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
            "servicemonitors",
        ),
    );
    let endpoint = wait_for(cp, "the ServiceMonitor demo", async || {
        let monitor = monitors.get("demo").await.ok()?;
        monitor.data["spec"]["endpoints"].get(0).cloned()
    })
    .await;
    assert!(
        endpoint["tlsConfig"].get("insecureSkipVerify").is_none(),
        "{endpoint}"
    );
    let job_file = scrape_job(
        &client,
        &ns,
        &pod,
        &endpoint,
        &cp.dir.join(format!("scrape-{ns}")),
    )
    .await;

    let promcheck = trustyai_local_cluster::binary("promcheck").expect("promcheck");
    let mut last = String::new();
    let found = wait::within(TIMEOUT, async || {
        let out = std::process::Command::new(&promcheck)
            .args(["fetch"])
            .arg(&job_file)
            .output()
            .expect("promcheck ran");
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        last.lines()
            .find(|l| {
                l.starts_with(r#"{__name__="trustyai_spd""#)
                    && l.contains(r#"modelId="demo-model""#)
            })
            .map(str::to_owned)
    })
    .await;
    let line = found.unwrap_or_else(|| {
        panic!(
            "no trustyai_spd in the scrape of {}:\n{last}\n{}",
            std::fs::read_to_string(&job_file).unwrap_or_default(),
            cp.logs()
        )
    });
    let value: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a value in {line}"));
    assert!((value - EXPECTED_SPD).abs() < 1e-9, "{line}");
}

/// The scrape job the Prometheus Operator would make of the ServiceMonitor's `endpoint` for
/// `pod`, written (with the CA it names) into `dir`; the job file.
async fn scrape_job(
    client: &kube::Client,
    ns: &str,
    pod: &Pod,
    endpoint: &serde_json::Value,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let port_name = endpoint["port"].as_str().expect("a port name");
    let port = target_port(client, ns, "demo", port_name)
        .await
        .unwrap_or_else(|| panic!("Service demo has no numbered port {port_name}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ip = pods
        .get(pod.metadata.name.as_deref().expect("a name"))
        .await
        .expect("the pod")
        .status
        .and_then(|s| s.pod_ip)
        .expect("an IP");
    let ca = ca_text(client, ns, &endpoint["tlsConfig"]["ca"])
        .await
        .unwrap_or_else(|| panic!("the CA the endpoint names: {endpoint}"));
    std::fs::create_dir_all(dir).expect("a folder");
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca).expect("written");
    let job = json!({
        "scheme": endpoint["scheme"],
        "metrics_path": endpoint["path"],
        "params": endpoint["params"],
        "target": format!("{ip}:{port}"),
        "tls_config": {
            "ca_file": ca_file,
            "server_name": endpoint["tlsConfig"]["serverName"],
        },
    });
    let job_file = dir.join("job.yaml");
    // JSON is YAML.
    std::fs::write(&job_file, job.to_string()).expect("written");
    job_file
}
