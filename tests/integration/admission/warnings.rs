//! What kubectl shows: the webhooks' warnings (kube-rs only logs them) and a refusal's field
//! errors, one per line.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::{manifest, webhook_only_violations};
use support::wait;

use super::{db_spec, pvc_spec};

fn kubectl_with(
    cp: &ControlPlane,
    ns: &str,
    args: &[&str],
    object: &Value,
) -> (bool, String, String) {
    let yaml = trustyai_crds::manifests::to_yaml(object);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-n", ns, "-f", "-"]);
    cp.kubectl(&all, Some(&yaml))
}

/// Polls a server-side dry-run create until its stderr satisfies `done`, for answers that
/// depend on the operator's Secret cache catching up with the cluster.
async fn dry_run_until(
    cp: &ControlPlane,
    ns: &str,
    object: &Value,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let started = Instant::now();
    let mut last = String::new();
    let answer = wait::within(Duration::from_secs(30), async || {
        let (ok, _, stderr) = kubectl_with(cp, ns, &["create", "--dry-run=server"], object);
        assert!(ok, "{what}: the dry run failed: {stderr}");
        if done(&stderr) {
            return Some(stderr);
        }
        last = stderr;
        None
    })
    .await;
    let Some(stderr) = answer else {
        panic!("{what}: not within 30s; last stderr: {last}");
    };
    eprintln!("{what}: after {:?}", started.elapsed());
    stderr
}

pub(super) async fn warnings_reach_kubectl(cp: &ControlPlane, client: &Client, ns: &str) {
    // kube-rs only logs warnings; kubectl shows them as "Warning: ..." on stderr.
    let mut busy = pvc_spec();
    busy["replicas"] = json!(3);
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &manifest("v1", "busy", busy));
    assert!(ok, "a warning does not refuse: {stderr}");
    assert!(
        stderr.contains(
            "Warning: spec.replicas: 3 replicas run as one pod while the data is on a claim"
        ),
        "{stderr}"
    );

    // The credentials Secret does not exist: the operator's Secret cache says so (it may need
    // a moment after start for its first list).
    let mut named = db_spec();
    named["storage"]["databaseConfigurations"] = json!("absent-creds");
    let object = manifest("v1", "db-warn", named);
    let missing =
        "Warning: spec.storage.databaseConfigurations: Secret \"absent-creds\" does not exist yet";
    dry_run_until(cp, ns, &object, "the missing-Secret warning", |e| {
        e.contains(missing)
    })
    .await;
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &object);
    assert!(ok, "{stderr}");
    assert!(stderr.contains(missing), "{stderr}");
    // Without databaseConfigurations, the defaulted name is checked.
    let (ok, _, stderr) = kubectl_with(cp, ns, &["apply"], &manifest("v1", "db-plain", db_spec()));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Secret \"db-plain-db-credentials\" does not exist yet"),
        "{stderr}"
    );

    // Once the Secret exists, the cache follows the watch and the warning goes away.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "absent-creds"},
        "stringData": {"databaseKind": "mysql"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret is created");
    let mut other = db_spec();
    other["storage"]["databaseConfigurations"] = json!("absent-creds");
    dry_run_until(
        cp,
        ns,
        &manifest("v1", "db-after", other),
        "no warning once the Secret exists",
        |e| !e.contains("does not exist yet"),
    )
    .await;
}

pub(super) fn kubectl_apply_prints_the_field_errors(cp: &ControlPlane, ns: &str) {
    let (ok, stdout, stderr) = kubectl_with(
        cp,
        ns,
        &["apply"],
        &manifest("v1", "applied-bad", webhook_only_violations()),
    );
    assert!(!ok, "refused: {stdout}");
    // kubectl renders the causes of a 422 one per line.
    for text in [
        r#"The TrustyAIService "applied-bad" is invalid"#,
        r#"* spec.image: Invalid value: "docker.io/someone/trustyai:1": must start with one of the allowed image prefixes: "quay.io/trustyai/""#,
        r#"* spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
        r#"* spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
    ] {
        assert!(stderr.contains(text), "{text:?} missing in {stderr}");
    }
}
