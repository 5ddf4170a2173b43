//! The local control plane itself, through the real API server: the CRD applies and is served
//! in both versions, the schema and CEL rules reject what they should, kubectl shows the printer
//! columns and descriptions, and simulated nodes make Deployments Available and garbage
//! collection work.

use crate::support;
use support::control_planes::{self, Claim, Concern};

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{merge_patch, tas_api};
use support::wait;
use trustyai_crds::rule_messages as says;

/// Applies the generated CRD. Until the conversion webhook is served, these tests use
/// `None` conversion (the two versions' specs are the same shape); this is the only place that
/// does, and it says so.
async fn install_crd_without_webhook(client: &Client) {
    let mut crd = trustyai_crds::crd::crd().expect("CRD builds");
    crd.spec.conversion = Some(
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion {
            strategy: "None".into(),
            webhook: None,
        },
    );
    apply_crd(client, &crd).await;
}

/// Applies `crd` and waits until the API server says it is Established.
async fn apply_crd(client: &Client, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.clone().expect("a CRD has a name");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &name,
        &PatchParams::apply("control-plane-test").force(),
        &Patch::Apply(crd),
    )
    .await
    .expect("CRD applies");
    let established = wait::within(Duration::from_secs(10), async || {
        let current = crds.get(&name).await.expect("CRD reads");
        current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
    assert!(established.is_some(), "{name} never became Established");
}

fn fixture(path: &str) -> Value {
    let text =
        std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).expect("fixture");
    match trustyai_crds::manifests::parse_documents(&text) {
        Ok(mut docs) if docs.len() == 1 => docs.remove(0),
        other => panic!("{path}: expected one YAML document: {other:?}"),
    }
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("object")
}

async fn create_error(api: &Api<DynamicObject>, value: Value) -> String {
    match api.create(&PostParams::default(), &object(value)).await {
        Ok(_) => panic!("the API server accepted an invalid object"),
        Err(e) => e.to_string(),
    }
}

fn tas(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": name}, "spec": spec})
}

/// This concern's control plane, shared, with the CRD applied; a client and a namespace of
/// the test's own (`prefix-…`). The claim holds the control plane for the test.
async fn with_the_crd(prefix: &str) -> (Claim, Client, String) {
    let claim = control_planes::shared(Concern::ControlPlane);
    let cp = claim.control_plane();
    let client = cp.client().await;
    install_crd_without_webhook(&client).await;
    let ns = cp.namespace(&client, prefix).await;
    (claim, client, ns)
}

/// The Go operator's manifests are accepted through their versions, and a v1 object reads back
/// through v1alpha1 (None conversion in these tests, see [`install_crd_without_webhook`]).
#[tokio::test]
async fn the_crd_serves_the_go_operators_manifests_in_both_versions() {
    let (_claim, client, ns) = with_the_crd("crd").await;
    let v1 = tas_api(&client, &ns, "v1");
    let v1alpha1 = tas_api(&client, &ns, "v1alpha1");
    v1.create(
        &PostParams::default(),
        &object(fixture("crds/tests/fixtures/go-operator/v1-sample.yaml")),
    )
    .await
    .expect("the Go v1 sample is accepted");
    v1alpha1
        .create(
            &PostParams::default(),
            &object(fixture(
                "crds/tests/fixtures/go-operator/v1alpha1-example.yaml",
            )),
        )
        .await
        .expect("the Go v1alpha1 example is accepted");

    let back = v1alpha1
        .get("trustyaiservice-sample")
        .await
        .expect("reads through v1alpha1");
    assert_eq!(
        back.types.as_ref().map(|t| t.api_version.as_str()),
        Some("trustyai.opendatahub.io/v1alpha1")
    );
    assert_eq!(back.data["spec"]["metrics"]["schedule"], "5s");
}

/// The schema's field errors name the field.
#[tokio::test]
async fn the_schema_names_the_invalid_field() {
    let (_claim, client, ns) = with_the_crd("crd").await;
    let v1 = tas_api(&client, &ns, "v1");
    let err = create_error(
        &v1,
        tas(
            "bad-format",
            json!({"storage": {"format": "S3"}, "metrics": {"schedule": "5s"}}),
        ),
    )
    .await;
    assert!(
        err.contains("spec.storage.format") && err.contains("Unsupported value"),
        "{err}"
    );
    let err = create_error(
        &v1,
        tas(
            "no-schedule",
            json!({"storage": {"format": "PVC"}, "metrics": {}}),
        ),
    )
    .await;
    assert!(
        err.contains("spec.metrics.schedule") && err.contains("Required value"),
        "{err}"
    );
}

/// Each CEL rule rejects what it should.
#[tokio::test]
async fn each_cel_rule_rejects_what_it_should() {
    let (_claim, client, ns) = with_the_crd("crd").await;
    let v1 = tas_api(&client, &ns, "v1");
    let cases = [
        (
            "a-name-that-is-far-too-long-to-be-a-service-name-with-the-tls-suffix",
            json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}),
            says::name_length(),
        ),
        (
            "pv-with-db",
            json!({"storage": {"format": "DATABASE", "pv": "pv1"}, "metrics": {"schedule": "5s"}}),
            says::PV_MODE.to_owned(),
        ),
        (
            "rel-folder",
            json!({"storage": {"format": "PVC", "folder": "inputs"}, "metrics": {"schedule": "5s"}}),
            says::FOLDER.to_owned(),
        ),
        (
            "dotdot",
            json!({"storage": {"format": "PVC", "folder": "/a/../b"}, "metrics": {"schedule": "5s"}}),
            says::FOLDER.to_owned(),
        ),
        (
            "bad-size",
            json!({"storage": {"format": "PVC", "size": "1Gx"}, "metrics": {"schedule": "5s"}}),
            says::SIZE_QUANTITY.to_owned(),
        ),
        (
            "zero-size",
            json!({"storage": {"format": "PVC", "size": "0"}, "metrics": {"schedule": "5s"}}),
            says::SIZE_POSITIVE.to_owned(),
        ),
        (
            "bad-pv",
            json!({"storage": {"format": "PVC", "pv": "Not_A_Name"}, "metrics": {"schedule": "5s"}}),
            says::SUBDOMAIN.to_owned(),
        ),
        (
            "bad-secret",
            json!({"storage": {"format": "DATABASE", "databaseConfigurations": "UPPER"}, "metrics": {"schedule": "5s"}}),
            says::SUBDOMAIN.to_owned(),
        ),
        (
            "bad-file",
            json!({"storage": {"format": "PVC"}, "data": {"filename": "a/b.csv"}, "metrics": {"schedule": "5s"}}),
            says::FILENAME.to_owned(),
        ),
        (
            "bad-schedule",
            json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5 seconds"}}),
            says::SCHEDULE.to_owned(),
        ),
    ];
    for (name, spec, expected) in cases {
        let err = create_error(&v1, tas(name, spec)).await;
        assert!(
            err.contains(&expected),
            "{name}: expected {expected:?} in: {err}"
        );
    }
}

/// Without the webhook, the TrustyAIMetric schema's CEL rules still require each parameter a
/// metric's family needs and refuse the other family's, in the webhook's words.
#[tokio::test]
async fn the_metric_crd_holds_each_familys_parameters_without_the_webhook() {
    let (_claim, client, ns) = with_the_crd("metric-crd").await;
    apply_crd(
        &client,
        &trustyai_crds::metric::crd::crd().expect("the TrustyAIMetric CRD builds"),
    )
    .await;
    let gvk =
        kube::api::GroupVersionKind::gvk("trustyai.opendatahub.io", "v1alpha1", "TrustyAIMetric");
    let metrics: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "trustyaimetrics"),
    );
    let metric = |name: &str, spec: Value| {
        json!({"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
               "metadata": {"name": name}, "spec": spec})
    };
    let err = create_error(
        &metrics,
        metric(
            "no-outcome",
            json!({"model": "m", "type": "spd", "protectedAttribute": "gender",
                   "privilegedValue": 1, "unprivilegedValue": 0}),
        ),
    )
    .await;
    for expected in [
        "spec.outcomeName: Required value: fairness metrics need the output the groups are compared on",
        "spec.favorableOutcome: Required value: fairness metrics need the favourable outcome's value",
    ] {
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
    }
    let err = create_error(
        &metrics,
        metric(
            "drift-with-group",
            json!({"model": "m", "type": "kstest", "protectedAttribute": "gender"}),
        ),
    )
    .await;
    let expected = "spec.protectedAttribute: Forbidden: only fairness metrics (spd, dir) take it";
    assert!(err.contains(expected), "expected {expected:?} in: {err}");
    metrics
        .create(
            &PostParams::default(),
            &object(metric(
                "complete",
                json!({"model": "m", "type": "dir", "protectedAttribute": "gender",
                       "privilegedValue": "male", "unprivilegedValue": "female",
                       "outcomeName": "income", "favorableOutcome": 1}),
            )),
        )
        .await
        .expect("a complete fairness metric is accepted");
}

/// Transition rules on update: the size grows but never shrinks, the volume's name stays once
/// set, DATABASE never goes back to PVC.
#[tokio::test]
async fn the_transition_rules_hold_on_update() {
    let (_claim, client, ns) = with_the_crd("crd").await;
    let v1 = tas_api(&client, &ns, "v1");
    v1.create(&PostParams::default(), &object(tas("grow", json!({"storage": {"format": "PVC", "size": "2Gi", "pv": "pv-a"}, "metrics": {"schedule": "5s"}}))))
        .await
        .expect("valid object");
    for (patch, expected) in [
        (
            json!({"spec": {"storage": {"size": "1Gi"}}}),
            says::size_shrink(None),
        ),
        (
            json!({"spec": {"storage": {"pv": "pv-b"}}}),
            says::pv_changed(None),
        ),
    ] {
        let err = v1
            .patch("grow", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect_err("refused");
        assert!(
            err.to_string().contains(&expected),
            "expected {expected:?} in: {err}"
        );
    }
    v1.patch(
        "grow",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"storage": {"size": "3Gi"}}})),
    )
    .await
    .expect("growing is allowed");
    v1.create(
        &PostParams::default(),
        &object(tas(
            "db",
            json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}}),
        )),
    )
    .await
    .expect("valid object");
    let err = merge_patch(&v1, "db", json!({"spec": {"storage": {"format": "PVC"}}}))
        .await
        .expect_err("refused");
    assert!(err.to_string().contains(says::FORMAT_BACK), "{err}");
}

/// A migration from a bound volume: the volume stays named while it is mounted, and goes with
/// the end of the migration. The error names the field, though the rule sits on spec.
#[tokio::test]
async fn a_migrations_volume_goes_only_with_its_end() {
    let (_claim, client, ns) = with_the_crd("crd").await;
    let v1 = tas_api(&client, &ns, "v1");
    v1.create(
        &PostParams::default(),
        &object(tas(
            "migrating",
            json!({"storage": {"format": "DATABASE", "folder": "/inputs", "pv": "pv-m"},
                   "data": {"filename": "data.csv"}, "metrics": {"schedule": "5s"}}),
        )),
    )
    .await
    .expect("valid object");
    let err = merge_patch(&v1, "migrating", json!({"spec": {"storage": {"pv": null}}}))
        .await
        .expect_err("refused");
    assert!(
        err.to_string().contains("spec.storage.pv: Invalid value")
            && err.to_string().contains(&says::pv_removed(None)),
        "{err}"
    );
    v1.patch(
        "migrating",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"storage": {"pv": null}, "data": {"filename": null}}})),
    )
    .await
    .expect("the end of the migration takes the volume's name with it");
}

/// `kubectl get` shows the printer columns (more with `-o wide`).
#[tokio::test]
async fn kubectl_get_shows_the_printer_columns() {
    let (claim, client, ns) = with_the_crd("crd").await;
    let cp = claim.control_plane();
    // `kubectl get` prints a header only over objects.
    tas_api(&client, &ns, "v1")
        .create(
            &PostParams::default(),
            &object(tas(
                "shown",
                json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}),
            )),
        )
        .await
        .expect("valid object");
    let (ok, out, err) = cp.kubectl(&["get", "tas", "-n", &ns], None);
    assert!(ok, "{err}");
    let header = out.lines().next().unwrap_or_default();
    for column in ["NAME", "READY", "REASON", "STORAGE", "REPLICAS", "AGE"] {
        assert!(
            header.contains(column),
            "column {column} missing in: {header}"
        );
    }
    assert!(
        !header.contains("IMAGE"),
        "wide columns only with -o wide: {header}"
    );
    let (ok, out, err) = cp.kubectl(&["get", "tas", "-n", &ns, "-o", "wide"], None);
    assert!(ok, "{err}");
    let header = out.lines().next().unwrap_or_default();
    for column in ["PHASE", "DATABASE", "IMAGE", "OBSERVED"] {
        assert!(
            header.contains(column),
            "-o wide column {column} missing in: {header}"
        );
    }
}

/// `kubectl explain <field>`, retried while kubectl cannot find the kind yet (discovery serves
/// it a moment after the CRD is Established): whether it succeeded, stdout and stderr.
async fn explain(cp: &support::ControlPlane, field: &str) -> (bool, String, String) {
    let mut last = None;
    let answer = wait::within(Duration::from_secs(30), async || {
        let (ok, out, err) = cp.kubectl(&["explain", field], None);
        if ok || !err.contains("couldn't find resource") {
            return Some((ok, out, err));
        }
        last = Some((ok, out, err));
        None
    })
    .await;
    answer.or(last).expect("at least one kubectl explain")
}

/// `kubectl explain` shows the descriptions.
#[tokio::test]
async fn kubectl_explain_shows_the_descriptions() {
    let (claim, _client, _ns) = with_the_crd("crd").await;
    let cp = claim.control_plane();
    // A paragraph is one line of the description: kubectl wraps it at the terminal width, so
    // the sentence below is found whole once the output's own line breaks are undone.
    let (ok, out, err) = explain(cp, "tas.spec").await;
    assert!(ok, "{err}");
    let unwrapped = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        unwrapped.contains(
            "how it stores the inference data it monitors and how often it computes metrics."
        ),
        "{out}"
    );
    let (ok, out, err) = explain(cp, "tas.spec.storage.pv").await;
    assert!(ok, "{err}");
    assert!(out.contains("existing PersistentVolume"), "{out}");
    let (ok, out, err) = explain(cp, "tas.spec").await;
    assert!(ok, "{err}");
    assert!(out.contains("Desired state of a TrustyAI service"), "{out}");
}

/// A Deployment `web` of 2 replicas in `ns`, owned by a ConfigMap `owner` (kwok's simulated
/// node runs its pods); the APIs of both kinds.
async fn owned_deployment(client: &Client, ns: &str) -> (Api<ConfigMap>, Api<Deployment>) {
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = owners
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
        )
        .await
        .expect("owner");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "controller": true
        }]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "example.invalid/web:1"}]}}
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
    (owners, deployments)
}

#[tokio::test]
async fn deployments_become_available_on_the_simulated_node() {
    let (_claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::ControlPlane, "kwok").await;
    let (_, deployments) = owned_deployment(&client, &ns).await;

    let available = wait::within(Duration::from_secs(60), async || {
        let d = deployments.get("web").await.expect("get");
        let status = d.status.unwrap_or_default();
        (status.available_replicas == Some(2)
            && status.conditions.unwrap_or_default().iter().any(|c| {
                c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
            }))
        .then_some(())
    })
    .await;
    assert!(
        available.is_some(),
        "the Deployment never became Available\n{}",
        cp.logs()
    );
}

#[tokio::test]
async fn the_garbage_collector_deletes_what_a_deleted_owner_owned() {
    let (_claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::ControlPlane, "kwok").await;
    let (owners, deployments) = owned_deployment(&client, &ns).await;

    owners
        .delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    let collected = wait::within(Duration::from_secs(60), async || {
        deployments
            .get_opt("web")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        collected.is_some(),
        "the garbage collector never removed the Deployment\n{}",
        cp.logs()
    );
}
