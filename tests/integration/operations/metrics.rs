//! `/metrics`: Prometheus' own scrape parser reads it in each format, and its counters move with
//! admission, conversion and reconciles.

use crate::support;
use support::control_planes::{self, Concern};

use kube::Client;
use support::cluster::{annotate, tas_api};
use support::operator::{Operator, free_port, http_get_accepting};
use support::temp::TempDir;
use support::wait;

use super::prometheus_text::{Sample, sum};
use super::*;

/// Prometheus' own scrape parser (`promcheck scrape`, built from the Prometheus module) reads
/// `/metrics` in the format each Accept asks for, picked by the Content-Type as a scrape does;
/// the series an alert needs are there before any event, and the process metrics too.
async fn prometheus_parses_the_scrape(ops_port: u16) {
    let promcheck = trustyai_local_cluster::binary("promcheck").expect("promcheck");
    let dir = TempDir::new("scrape");
    // A Prometheus 3 scrape's Accept, then a client that asks for nothing (the text format).
    let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    for (accept, expected_type) in [
        (
            Some(prometheus),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        (None, "text/plain; version=0.0.4; charset=utf-8"),
    ] {
        let (code, content_type, body) =
            tokio::task::spawn_blocking(move || http_get_accepting(ops_port, "/metrics", accept))
                .await
                .expect("join")
                .expect("/metrics answers");
        assert_eq!(code, 200, "{body}");
        let content_type = content_type.expect("a Content-Type");
        assert_eq!(content_type, expected_type);
        let file = dir.join("metrics.txt");
        std::fs::write(&file, &body).expect("write the scrape");
        let parsed = std::process::Command::new(&promcheck)
            .arg("scrape")
            .arg(&content_type)
            .arg(&file)
            .output()
            .expect("run promcheck");
        let stdout = String::from_utf8_lossy(&parsed.stdout);
        assert!(
            parsed.status.success(),
            "Prometheus refused the {content_type} scrape: {}\n{body}",
            String::from_utf8_lossy(&parsed.stderr)
        );
        for series in [
            "{__name__=\"trustyai_operator_reconciles_total\", result=\"error\"} 0",
            "{__name__=\"trustyai_operator_reconcile_errors_total\", category=\"ApiUnreachable\"} 0",
            "{__name__=\"trustyai_operator_webhook_requests_total\", endpoint=\"mutate\", outcome=\"malformed\"}",
            "{__name__=\"trustyai_operator_admission_denials_total\", rule=\"storage_size\"}",
            "{__name__=\"trustyai_operator_webhook_refusals_total\", reason=\"throttled\"} 0",
            "{__name__=\"trustyai_operator_build_info\", version=\"",
            "{__name__=\"process_resident_memory_bytes\"}",
            "{__name__=\"process_cpu_seconds_total\"}",
            "{__name__=\"process_start_time_seconds\"}",
        ] {
            assert!(
                stdout.contains(series),
                "{series} missing from what Prometheus read of the {content_type} scrape:\n{stdout}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_reads_metrics_that_follow_the_operators_work() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Operations, "metrics").await;
    let apps = cp.namespace(&client, "metrics-apps").await;
    let mut flags = vec!["--create-webhook-configurations"];
    flags.extend(ELECTION_FLAGS);
    let operator = ready(start(cp, &ns, free_port(), free_port(), &flags)).await;
    let ops = operator.ops_port;
    wait::until_showing(
        "leader=1",
        TIMEOUT,
        || operator.logs(),
        || async { (leader_gauge(ops).await? == 1.0).then_some(()) },
    )
    .await;

    prometheus_parses_the_scrape(ops).await;
    let before = metrics(ops).await.expect("/metrics");
    assert_the_gauges_and_a_future_certificate_expiry(&before);
    let tls = connector(&client, &ns).await;
    let after = webhook_requests_are_counted(&tls, &operator, &before).await;
    let last = reconciles_on_the_leader_are_counted(&client, &apps, &operator, &after).await;
    unchanged_children_are_counted_as_skipped(&client, &apps, &operator, &last).await;
    stop(operator).await;
}

/// The gauges are there before any event, and the serving certificate expires in the future.
fn assert_the_gauges_and_a_future_certificate_expiry(samples: &[Sample]) {
    for name in [
        "trustyai_operator_build_info",
        "trustyai_operator_serving_certificate_expiry_timestamp_seconds",
        "trustyai_operator_leader",
        "trustyai_operator_trustyaiservices",
    ] {
        assert!(
            samples.iter().any(|(n, _, _)| n == name),
            "{name} missing from /metrics"
        );
    }
    let expiry = sum(
        samples,
        "trustyai_operator_serving_certificate_expiry_timestamp_seconds",
        &[],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(
        expiry > now,
        "certificate expiry {expiry} is not in the future"
    );
}

/// Three denied admission requests and two conversions move the webhook counters, the denials
/// by rule and the latency histogram from `before`; returns the samples after them.
async fn webhook_requests_are_counted(
    tls: &TlsConnector,
    operator: &Operator,
    before: &[Sample],
) -> Vec<Sample> {
    let requests = "trustyai_operator_webhook_requests_total";
    let validate_denied = [("endpoint", "validate"), ("outcome", "denied")];
    let convert = [("endpoint", "convert")];
    let (denied0, convert0) = (
        sum(before, requests, &validate_denied),
        sum(before, requests, &convert),
    );
    for i in 0..3 {
        assert_validate_denies(tls, operator.webhook_port, &format!("m-validate-{i}")).await;
    }
    for i in 0..2 {
        assert_convert_converts(tls, operator.webhook_port, &format!("m-convert-{i}")).await;
    }
    let after = metrics(operator.ops_port).await.expect("/metrics");
    let (denied1, convert1) = (
        sum(&after, requests, &validate_denied),
        sum(&after, requests, &convert),
    );
    assert!(
        denied1 >= denied0 + 3.0,
        "validate/denied {denied0} -> {denied1}"
    );
    assert!(
        convert1 >= convert0 + 2.0,
        "convert {convert0} -> {convert1}"
    );
    assert!(
        sum(
            &after,
            "trustyai_operator_admission_denials_total",
            &[("rule", "image")]
        ) >= 3.0,
        "admission_denials_total{{rule=image}}"
    );
    assert!(
        sum(
            &after,
            "trustyai_operator_webhook_request_duration_seconds_count",
            &[("endpoint", "validate")]
        ) >= 3.0,
        "the validate latency histogram counts the requests"
    );
    after
}

/// Waits until the sum of the samples `name` with `labels` on `operator`'s `/metrics` passes
/// `enough`; returns it.
async fn wait_for_sum(
    operator: &Operator,
    what: &str,
    name: &str,
    labels: &[(&str, &str)],
    enough: impl Fn(f64) -> bool,
) -> f64 {
    wait::until_showing(
        what,
        TIMEOUT,
        || operator.logs(),
        || async {
            let s = sum(&metrics(operator.ops_port).await?, name, labels);
            enough(s).then_some(s)
        },
    )
    .await
}

/// The reconcile of a new TrustyAIService `counted` in `apps` is counted (from `after`) and
/// timed, and the managed gauge follows; returns the samples after it.
async fn reconciles_on_the_leader_are_counted(
    client: &Client,
    apps: &str,
    operator: &Operator,
    after: &[Sample],
) -> Vec<Sample> {
    let reconciles = "trustyai_operator_reconciles_total";
    let success0 = sum(after, reconciles, &[("result", "success")]);
    create_reconciled(client, apps, "v1", "counted", || operator.logs()).await;
    let success1 = wait_for_sum(
        operator,
        "reconciles_total{result=success} to grow",
        reconciles,
        &[("result", "success")],
        |s| s > success0,
    )
    .await;
    let last = metrics(operator.ops_port).await.expect("/metrics");
    assert!(
        sum(
            &last,
            "trustyai_operator_reconcile_duration_seconds_count",
            &[]
        ) >= success1,
        "every reconcile is timed"
    );
    // The gauge is set after a reconcile's result is emitted, so it may trail the counters.
    wait_for_sum(
        operator,
        "trustyaiservices >= 1",
        "trustyai_operator_trustyaiservices",
        &[],
        |managed| managed >= 1.0,
    )
    .await;
    eprintln!("reconciles_total{{result=success}}: {success0} -> {success1}");
    last
}

/// The children of `counted` were created by an apply each; a reconcile with nothing to change
/// (an annotation on the TrustyAIService triggers one) skips their applies without a request.
async fn unchanged_children_are_counted_as_skipped(
    client: &Client,
    apps: &str,
    operator: &Operator,
    last: &[Sample],
) {
    let applies = "trustyai_operator_child_applies_total";
    assert!(
        sum(
            last,
            applies,
            &[("kind", "Deployment"), ("outcome", "created")]
        ) >= 1.0,
        "the Deployment's creation is counted"
    );
    let skipped = [("kind", "Service"), ("outcome", "skipped")];
    let skipped0 = sum(last, applies, &skipped);
    annotate(&tas_api(client, apps, "v1"), "counted", "poke", "1")
        .await
        .expect("annotating");
    let skipped1 = wait_for_sum(
        operator,
        "child_applies_total{kind=Service,outcome=skipped} to grow by both Services",
        applies,
        &skipped,
        |s| s >= skipped0 + 2.0,
    )
    .await;
    eprintln!("child_applies_total{{kind=Service,outcome=skipped}}: {skipped0} -> {skipped1}");
}
