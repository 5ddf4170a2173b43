//! TrustyAIMetrics with the real TrustyAI service on the real node: the operator (in its pod,
//! installed by the chart) schedules the declared metric in the service's pod over the internal
//! TLS port, reads its value from the service's `/q/metrics`, says in the status and events
//! whether the model is within bounds, schedules it again in the replacement of a deleted pod,
//! and removes it from the service when the object is deleted.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use trustyai_crds::metric::TrustyAIMetric;
use trustyai_crds::metric::types::TrustyAIMetricStatus;
use trustyai_local_cluster::ControlPlane;

use super::release::{NAMESPACE, TIMEOUT, installed_namespace, is_ready, logs, operator_pods};
use super::service::ready_pod;
use super::service_api::{EXPECTED_SPD, MODEL, User, uploaded_pvc_demo};
use crate::support::cluster::{events_regarding, set_finalizers, tas_api};

/// Polls `check` until it returns `Some`; on a timeout, panics with `what`, the operator's and
/// the control plane's logs, and the TrustyAI service's own (what it made of the requests).
async fn wait_for<T>(
    cp: &ControlPlane,
    ns: &str,
    what: &str,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let shown = || {
        let (_, text, err) = cp.kubectl(
            &[
                "logs",
                "--namespace",
                ns,
                "--selector",
                "app.kubernetes.io/instance=demo",
                "--container",
                "trustyai-service",
                "--tail",
                "80",
                "--prefix",
            ],
            None,
        );
        format!(
            "{}\n--- the TrustyAI service (kubectl logs --tail 80) ---\n{text}{err}",
            logs(cp)
        )
    };
    crate::support::wait::until_showing(what, TIMEOUT, shown, check).await
}

/// The metric the tests declare: the reference conversation's SPD, under the default bounds
/// (±0.1), which −0.3 is outside of.
fn spd_metric(name: &str) -> TrustyAIMetric {
    serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1",
        "kind": "TrustyAIMetric",
        "metadata": {"name": name},
        "spec": {"model": MODEL, "type": "spd", "protectedAttribute": "gender",
                 "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
                 "favorableOutcome": 1, "batchSize": 100},
    }))
    .expect("a TrustyAIMetric")
}

fn condition<'a>(status: &'a TrustyAIMetricStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    let c = status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.as_str(), c.reason.as_deref().unwrap_or("")))
}

/// Waits until the service's `/q/metrics` has the SPD gauge of `request_name`, and asserts it
/// has one series: the metric was scheduled once.
async fn assert_one_published_series(
    cp: &ControlPlane,
    ns: &str,
    user: &User,
    request_name: &str,
    what: &str,
) {
    let series = wait_for(cp, ns, what, async || {
        spd_series(user, request_name)
            .await
            .filter(|s| !s.is_empty())
    })
    .await;
    assert_eq!(series.len(), 1, "{what}: {series:?}");
}

/// The series of the service's SPD gauge named `request_name`, from its `/q/metrics` as the
/// user reads it through `<cr>-tls`.
async fn spd_series(user: &User, request_name: &str) -> Option<Vec<String>> {
    let (code, body) = user
        .api
        .call(&user.token, "GET", "/q/metrics", None)
        .await
        .ok()?;
    if code != 200 {
        return None;
    }
    let text = match body {
        Value::String(text) => text,
        other => other.to_string(),
    };
    let label = format!("requestName=\"{request_name}\"");
    Some(
        text.lines()
            .filter(|l| l.starts_with("trustyai_spd{") && l.contains(&label))
            .map(str::to_owned)
            .collect(),
    )
}

/// The SPD requests the service's pod schedules now.
async fn scheduled_spd(user: &User) -> Option<usize> {
    let (code, body) = user
        .api
        .call(
            &user.token,
            "GET",
            "/metrics/group/fairness/spd/requests",
            None,
        )
        .await
        .ok()?;
    (code == 200).then(|| body["requests"].as_array().map_or(0, Vec::len))
}

/// The operator's `trustyai_operator_metric_*` series, scraped by Prometheus' own HTTP client
/// and parser (`promcheck fetch`) from the ops port of each Ready operator pod, as a
/// ServiceMonitor's scrape would (only the leader exports them); one
/// `{__name__="...", labels...} value` line each.
fn operator_metric_series(cp: &ControlPlane, pods: &[Pod], dir: &std::path::Path) -> Vec<String> {
    let promcheck = trustyai_local_cluster::binary("promcheck").expect("promcheck");
    std::fs::create_dir_all(dir).expect("a folder");
    let mut series = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) else {
            continue;
        };
        let job =
            json!({"scheme": "http", "metrics_path": "/metrics", "target": format!("{ip}:8080")});
        let job_file = dir.join(format!("operator-{i}.yaml"));
        // JSON is YAML.
        std::fs::write(&job_file, job.to_string()).expect("written");
        let out = std::process::Command::new(&promcheck)
            .arg("fetch")
            .arg(&job_file)
            .output()
            .expect("promcheck ran");
        assert!(
            out.status.success(),
            "Prometheus' client and parser refused the operator's scrape: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            logs(cp)
        );
        series.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.starts_with(r#"{__name__="trustyai_operator_metric_"#))
                .map(str::to_owned),
        );
    }
    series
}

/// The value of the operator's series `name` for the metric object `metric`, from `series`.
fn series_value(series: &[String], name: &str, metric: &str) -> Option<f64> {
    let line = series.iter().find(|l| {
        l.starts_with(&format!(r#"{{__name__="{name}""#))
            && l.contains(&format!(r#"metric_name="{metric}""#))
    })?;
    line.rsplit(' ').next()?.parse().ok()
}

/// demo-spd's value appears in its status, outside its bounds, registered with `pod`, and a
/// Warning says so.
async fn assert_registered_outside_its_bounds(
    cp: &ControlPlane,
    client: &kube::Client,
    ns: &str,
    metrics: &Api<TrustyAIMetric>,
    pod: &Pod,
) {
    let status = wait_for(cp, ns, "demo-spd's value in its status", async || {
        let status = metrics.get("demo-spd").await.ok()?.status?;
        (status.value.is_some() && condition(&status, "Registered")? == ("True", "Registered"))
            .then_some(status)
    })
    .await;
    let value = status.value.unwrap_or(f64::NAN);
    assert!((value - EXPECTED_SPD).abs() < 1e-9, "{status:?}");
    assert_eq!(
        condition(&status, "WithinBounds"),
        Some(("False", "OutsideBounds"))
    );
    assert_eq!(status.within_bounds.as_deref(), Some("False"));
    assert_eq!(status.registrations.len(), 1, "{status:?}");
    assert_eq!(
        status.registrations[0].pod_uid,
        pod.metadata.uid.clone().expect("a uid")
    );
    wait_for_event(cp, client, ns, "demo-spd", "OutsideBounds", "Warning").await;
}

/// The operator exports demo-spd's value and its judgement for the chart's alert, and
/// Prometheus' own client reads them; the alert's and the dashboard panel's metric names are
/// among them.
async fn assert_the_operator_exports(cp: &ControlPlane, client: &kube::Client, ns: &str) {
    let system_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let scrape_dir = cp.dir.join(format!("operator-scrape-{ns}"));
    let exported = wait_for(cp, ns, "the operator's series of demo-spd", async || {
        let ready: Vec<Pod> = operator_pods(&system_pods)
            .await?
            .into_iter()
            .filter(is_ready)
            .collect();
        let series = operator_metric_series(cp, &ready, &scrape_dir);
        series_value(&series, "trustyai_operator_metric_value", "demo-spd").map(|_| series)
    })
    .await;
    let exported_value = series_value(&exported, "trustyai_operator_metric_value", "demo-spd");
    assert!(
        exported_value.is_some_and(|v| (v - EXPECTED_SPD).abs() < 1e-9),
        "{exported:?}"
    );
    assert_eq!(
        series_value(
            &exported,
            "trustyai_operator_metric_within_bounds",
            "demo-spd"
        ),
        Some(0.0),
        "{exported:?}"
    );
    for name in crate::helm_chart::monitoring::metric_alert_and_panel_names() {
        assert!(
            exported
                .iter()
                .any(|l| l.starts_with(&format!(r#"{{__name__="{name}""#))),
            "the chart's alert or panel uses {name}, which the scrape lacks: {exported:?}"
        );
    }
}

/// What an ML team sees: `kubectl get tam -o wide` and demo-spd's events, printed for the
/// reader of the test's output.
fn show_what_an_ml_team_sees(cp: &ControlPlane, ns: &str) {
    let (_, table, _) = cp.kubectl(&["get", "tam", "-n", ns, "-o", "wide"], None);
    let (_, events, _) = cp.kubectl(
        &[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            "involvedObject.name=demo-spd",
        ],
        None,
    );
    println!("$ kubectl get tam -o wide\n{table}\n$ kubectl get events\n{events}");
}

#[tokio::test]
async fn a_declared_metric_follows_its_service_through_a_restart() {
    let (_claim, cp, client, ns) = installed_namespace(false, "metrics").await;
    let (pod, user) = uploaded_pvc_demo(cp, &client, &ns).await;
    let metrics: Api<TrustyAIMetric> = Api::namespaced(client.clone(), &ns);
    metrics
        .create(&PostParams::default(), &spd_metric("demo-spd"))
        .await
        .expect("created");
    let request_name = format!("{ns}/demo-spd");

    assert_registered_outside_its_bounds(cp, &client, &ns, &metrics, &pod).await;
    // The service itself publishes it, once.
    assert_one_published_series(cp, &ns, &user, &request_name, "the service's gauge").await;
    assert_the_operator_exports(cp, &client, &ns).await;
    show_what_an_ml_team_sees(cp, &ns);

    // The pod is replaced: the new process gets the metric, once, and the value comes back.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let old = pod.metadata.name.clone().expect("a name");
    pods.delete(&old, &DeleteParams::default())
        .await
        .expect("deleted");
    let replacement = ready_pod(cp, &pods, "demo", Some(&old)).await;
    let new_uid = replacement.metadata.uid.clone().expect("a uid");
    let replacement_ready = std::time::Instant::now();
    wait_for(
        cp,
        &ns,
        "demo-spd registered with the replacement pod",
        async || {
            let status = metrics.get("demo-spd").await.ok()?.status?;
            (status.registrations.len() == 1
                && status.registrations[0].pod_uid == new_uid
                && condition(&status, "Registered")? == ("True", "Registered"))
                .then_some(())
        },
    )
    .await;
    // Reported, not asserted (a measurement, not a deadline): bench/results/README.md quotes it.
    println!(
        "re-registration: {:?} after the replacement pod was seen Ready",
        replacement_ready.elapsed()
    );
    // Scheduled once in the new process, as the service itself lists it.
    user.api.wait_reachable(&user.token).await;
    assert_eq!(scheduled_spd(&user).await, Some(1));
    // The service computes scheduled metrics only for models with inferences recorded since it
    // started: with the next inference data the value is back, from the one request.
    user.upload().await;
    let what = "the replacement's gauge, from one request after the restart";
    assert_one_published_series(cp, &ns, &user, &request_name, what).await;

    // A wider threshold puts the value within bounds, and a Normal event says so.
    metrics
        .patch(
            "demo-spd",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"thresholdDelta": 0.4}})),
        )
        .await
        .expect("patched");
    wait_for(cp, &ns, "demo-spd within its wider bounds", async || {
        let status = metrics.get("demo-spd").await.ok()?.status?;
        (condition(&status, "WithinBounds")? == ("True", "WithinBounds")).then_some(())
    })
    .await;
    wait_for_event(cp, &client, &ns, "demo-spd", "WithinBounds", "Normal").await;
    // The changed spec replaced the request: still one.
    wait_for(cp, &ns, "one scheduled SPD after the change", async || {
        (scheduled_spd(&user).await? == 1).then_some(())
    })
    .await;

    // Deleting the object removes the metric from the service.
    delete_metric(cp, &ns, &metrics, "demo-spd").await;
    wait_for(cp, &ns, "no SPD scheduled in the service", async || {
        (scheduled_spd(&user).await? == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_metric_without_its_service_says_why_yet_goes_at_once_when_deleted() {
    let (_claim, cp, client, ns) = installed_namespace(false, "metrics-orphan").await;
    let metrics: Api<TrustyAIMetric> = Api::namespaced(client.clone(), &ns);
    let mut metric = spd_metric("orphan");
    metric.spec.service = Some("absent".into());
    metrics
        .create(&PostParams::default(), &metric)
        .await
        .expect("created");
    let status = wait_for(cp, &ns, "orphan's Registered condition", async || {
        let status = metrics.get("orphan").await.ok()?.status?;
        (condition(&status, "Registered")?.1 == "ServiceNotFound").then_some(status)
    })
    .await;
    let message = message(&status, "Registered");
    assert!(message.contains("absent"), "{message}");
    assert_eq!(
        condition(&status, "WithinBounds"),
        Some(("Unknown", "NoValueYet"))
    );
    delete_metric(cp, &ns, &metrics, "orphan").await;
}

/// The finalizer the test holds a TrustyAIService with while it is being deleted.
const HOLD: &str = "trustyai.test/hold";

#[tokio::test]
async fn a_metric_follows_its_services_deletion_without_blocking_its_own() {
    let (_claim, cp, client, ns) = installed_namespace(false, "metrics-gone").await;
    uploaded_pvc_demo(cp, &client, &ns).await;
    let metrics: Api<TrustyAIMetric> = Api::namespaced(client.clone(), &ns);
    for name in ["leaving", "staying"] {
        metrics
            .create(&PostParams::default(), &spd_metric(name))
            .await
            .expect("created");
        wait_for(cp, &ns, &format!("{name} registered"), async || {
            let status = metrics.get(name).await.ok()?.status?;
            (condition(&status, "Registered")? == ("True", "Registered")).then_some(())
        })
        .await;
    }

    // The service is being deleted (held by the test's finalizer): the metrics say so.
    let services = tas_api(&client, &ns, "v1");
    let mut finalizers = services
        .get("demo")
        .await
        .expect("demo")
        .metadata
        .finalizers
        .unwrap_or_default();
    finalizers.push(HOLD.to_owned());
    set_finalizers(&services, "demo", &finalizers)
        .await
        .expect("held");
    services
        .delete("demo", &DeleteParams::default())
        .await
        .expect("deleted");
    let going = wait_for(cp, &ns, "staying says its service is going", async || {
        let status = metrics.get("staying").await.ok()?.status?;
        (condition(&status, "Registered")? == ("False", "ServiceNotReady")).then_some(status)
    })
    .await;
    assert!(
        message(&going, "Registered").contains("demo is being deleted"),
        "{going:?}"
    );

    // A metric deleted meanwhile goes at once.
    delete_metric(cp, &ns, &metrics, "leaving").await;

    // The service gone: the metric says there is none, and goes at once when deleted.
    let held = services
        .get("demo")
        .await
        .expect("demo")
        .metadata
        .finalizers;
    let rest: Vec<String> = held.into_iter().flatten().filter(|f| f != HOLD).collect();
    set_finalizers(&services, "demo", &rest)
        .await
        .expect("released");
    let gone = wait_for(cp, &ns, "staying says its service is gone", async || {
        let status = metrics.get("staying").await.ok()?.status?;
        (condition(&status, "Registered")? == ("False", "ServiceNotFound")).then_some(status)
    })
    .await;
    assert!(message(&gone, "Registered").contains(&ns), "{gone:?}");
    delete_metric(cp, &ns, &metrics, "staying").await;
}

/// Waits for an event of `type_` (Normal, Warning) and `reason` on the TrustyAIMetric `name`.
async fn wait_for_event(
    cp: &ControlPlane,
    client: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
    type_: &str,
) {
    wait_for(cp, ns, &format!("a {type_} {reason} event"), async || {
        let events = events_regarding(client, ns, name, reason).await;
        events
            .iter()
            .any(|e| e.type_.as_deref() == Some(type_))
            .then_some(())
    })
    .await;
}

/// Deletes the TrustyAIMetric `name` and waits until it is gone (its finalizer done).
async fn delete_metric(cp: &ControlPlane, ns: &str, metrics: &Api<TrustyAIMetric>, name: &str) {
    metrics
        .delete(name, &DeleteParams::default())
        .await
        .expect("deleted");
    wait_for(cp, ns, &format!("{name} gone"), async || {
        metrics.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The message of the condition `type_`.
fn message(status: &TrustyAIMetricStatus, type_: &str) -> String {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}
