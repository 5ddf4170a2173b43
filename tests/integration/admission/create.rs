//! Creating through the webhooks: refusals name every field at once, defaults are stored,
//! v1alpha1 is converted, defaulted and validated, and a dry run answers the same and stores
//! nothing.

use crate::support;

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::Status;
use serde_json::{Value, json};
use support::cluster::{MUTATING_WEBHOOK, tas, tas_api, webhook_only_violations};

use super::{assert_invalid, cause_fields, db_spec, pvc_spec, refusal};

/// The refusal of `bad`, a spec with [`webhook_only_violations`], created through `api` with
/// `params`; panics with `what` when it is not refused.
async fn refused_violations(api: &Api<DynamicObject>, params: &PostParams, what: &str) -> Status {
    let bad = tas("v1", "bad", webhook_only_violations());
    refusal(api.create(params, &bad).await, what)
}

pub(super) async fn refusals_name_every_field(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let status = refused_violations(
        &api,
        &PostParams::default(),
        "three webhook-only violations",
    )
    .await;
    assert_invalid(
        &status,
        &[
            &format!("admission webhook \"{MUTATING_WEBHOOK}\" denied the request"),
            r#"TrustyAIService.trustyai.opendatahub.io "bad" is invalid"#,
            r#"spec.image: Invalid value: "docker.io/someone/trustyai:1": must start with one of the allowed image prefixes: "quay.io/trustyai/""#,
            r#"spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
            r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
        ],
        "all violations at once",
    );
    let mut fields = cause_fields(&status);
    fields.sort();
    assert_eq!(
        fields,
        ["spec.data.format", "spec.image", "spec.metrics.schedule"],
        "one cause per field: {status:?}"
    );
    assert!(api.get_opt("bad").await.expect("get").is_none());

    // Errors the CRD's CEL rules also catch (a relative folder, a size that is no quantity) and
    // errors only the webhook knows, in one answer: the defaulting webhook runs before the
    // schema and CEL, and denies with every violation.
    let status = refusal(
        api.create(
            &PostParams::default(),
            &tas(
                "v1",
                "worse",
                json!({
                    "image": "docker.io/someone/trustyai:1",
                    "storage": {"format": "PVC", "folder": "inputs", "size": "abc"},
                    "data": {"format": "JSON"},
                    "metrics": {"schedule": "5s"}
                }),
            ),
        )
        .await,
        "CEL and webhook-only violations",
    );
    let mut fields = cause_fields(&status);
    fields.sort();
    assert_eq!(
        fields,
        [
            "spec.data.format",
            "spec.image",
            "spec.storage.folder",
            "spec.storage.size"
        ],
        "every violation in one answer: {status:?}"
    );
    assert!(
        status.message.contains(&format!(
            "admission webhook \"{MUTATING_WEBHOOK}\" denied the request"
        )),
        "{}",
        status.message
    );
}

/// Creates `name` with `spec` through `api` (panicking with `what` when it is refused) and reads
/// back the spec the API server stored: what the defaulting webhook added.
async fn stored_spec(api: &Api<DynamicObject>, name: &str, spec: Value, what: &str) -> Value {
    api.create(&PostParams::default(), &tas("v1", name, spec))
        .await
        .expect(what);
    let stored = api.get(name).await.expect("stored");
    stored.data["spec"].clone()
}

pub(super) async fn defaults_are_stored(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let what = "a minimal PVC object is admitted";
    assert_eq!(
        stored_spec(&api, "defaults-pvc", pvc_spec(), what).await,
        json!({
            "replicas": 1,
            "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain"},
            "data": {"filename": "data.csv", "format": "CSV"},
            "metrics": {"schedule": "5s", "batchSize": 5000}
        }),
        "every PVC default is stored"
    );

    let what = "a minimal DATABASE object is admitted";
    assert_eq!(
        stored_spec(&api, "defaults-db", db_spec(), what).await,
        json!({
            "replicas": 1,
            "storage": {"format": "DATABASE", "databaseConfigurations": "defaults-db-db-credentials"},
            "metrics": {"schedule": "5s", "batchSize": 5000}
        }),
        "DATABASE gets the credentials Secret name and no volume defaults"
    );
}

pub(super) async fn v1alpha1_is_converted_defaulted_and_validated(client: &Client, ns: &str) {
    let alpha = tas_api(client, ns, "v1alpha1");
    alpha
        .create(
            &PostParams::default(),
            &tas("v1alpha1", "alpha", pvc_spec()),
        )
        .await
        .expect("created through v1alpha1");
    let as_v1 = tas_api(client, ns, "v1").get("alpha").await.expect("v1");
    assert_eq!(as_v1.data["spec"]["replicas"], 1, "{:?}", as_v1.data);
    assert_eq!(as_v1.data["spec"]["storage"]["size"], "1Gi");
    assert_eq!(
        as_v1.data["spec"]["storage"]["retention"], "Retain",
        "the v1-only default is there when read through v1"
    );
    let as_alpha = alpha.get("alpha").await.expect("v1alpha1");
    assert_eq!(as_alpha.data["spec"]["metrics"]["batchSize"], 5000);
    assert!(
        as_alpha.data["spec"]["storage"].get("retention").is_none(),
        "v1alpha1 has no retention: {:?}",
        as_alpha.data
    );

    let mut bad = webhook_only_violations();
    bad.as_object_mut().map(|spec| spec.remove("image"));
    let status = refusal(
        alpha
            .create(&PostParams::default(), &tas("v1alpha1", "alpha-bad", bad))
            .await,
        "an invalid v1alpha1 object",
    );
    assert_invalid(
        &status,
        &[
            MUTATING_WEBHOOK,
            "spec.metrics.schedule: Invalid value",
            "spec.data.format: Unsupported value",
        ],
        "v1alpha1 refusal",
    );
    assert!(alpha.get_opt("alpha-bad").await.expect("get").is_none());
}

pub(super) async fn dry_run_answers_the_same_and_stores_nothing(client: &Client, ns: &str) {
    let api = tas_api(client, ns, "v1");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let real = refused_violations(&api, &PostParams::default(), "real create").await;
    let dry = refused_violations(&api, &dry_run, "dry-run create").await;
    assert_eq!(dry.message, real.message, "the same errors");
    assert_eq!(cause_fields(&dry), cause_fields(&real));

    let answered = api
        .create(&dry_run, &tas("v1", "dry", pvc_spec()))
        .await
        .expect("a valid dry run is admitted");
    assert_eq!(
        answered.data["spec"]["storage"]["folder"], "/inputs",
        "the dry-run answer shows the defaults"
    );
    assert!(
        api.get_opt("dry").await.expect("get").is_none(),
        "a dry run stores nothing"
    );
}
