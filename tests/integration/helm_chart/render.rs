//! What the chart renders, checked with `helm lint` and `helm template` alone (no cluster): the
//! webhook registrations are the operator's own, the CRD copy is the generated CRD, every
//! cluster-scoped object is named after the release, and cert-manager's issuer is the chart's
//! own or the named ClusterIssuer.

use std::path::Path;

use serde_json::Value;

use super::{
    KUBE_VERSION, NAMED_CLUSTER_ISSUER, chart_dir, documents, helm, of_kind, refused, template,
};

/// The chart's webhook registrations are the ones the operator applies itself in local mode
/// (`trustyai_operator::webhook_configurations`): the same entry names (the API server names
/// them in refusals), paths, rules and policies, given the chart's Service and timeout.
#[test]
fn the_charts_webhook_registrations_are_the_operators() {
    use trustyai_certs::WebhookEndpoint;
    use trustyai_operator::webhook_configurations::{AdmissionWebhook, mutating, validating};

    let objects = documents(&template(&[]));
    let registration = |kind: &str| -> Value {
        let found = of_kind(&objects, kind);
        assert_eq!(found.len(), 1, "one {kind}");
        found[0]["webhooks"].clone()
    };
    let chart_validating = registration("ValidatingWebhookConfiguration");
    let chart_mutating = registration("MutatingWebhookConfiguration");
    let service = &chart_validating[0]["clientConfig"]["service"];
    let endpoint = WebhookEndpoint::Service {
        name: service["name"].as_str().expect("a Service").to_owned(),
        namespace: "trustyai-system".to_owned(),
        port: 443,
    };
    let timeout = chart_validating[0]["timeoutSeconds"]
        .as_i64()
        .and_then(|t| i32::try_from(t).ok())
        .expect("timeoutSeconds");
    let ours = |value: serde_json::Result<Value>| value.expect("JSON")["webhooks"].clone();
    assert_eq!(
        chart_validating,
        ours(serde_json::to_value(validating("any", &endpoint, timeout)))
    );
    assert_eq!(
        chart_mutating,
        ours(serde_json::to_value(mutating("any", &endpoint, timeout)))
    );
    for (webhook, chart) in [
        (AdmissionWebhook::Validating, &chart_validating),
        (AdmissionWebhook::Mutating, &chart_mutating),
    ] {
        assert_eq!(chart[0]["name"], webhook.entry_name());
        assert_eq!(chart[0]["clientConfig"]["service"]["path"], webhook.path());
    }
}

#[test]
fn chart_crd_is_the_generated_crd() {
    let generated = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/trustyaiservices.yaml"),
    )
    .expect("crd");
    let copy = std::fs::read_to_string(chart_dir().join("files/trustyaiservices.yaml"))
        .expect("chart copy");
    assert!(
        generated == copy,
        "charts/trustyai-operator/files/trustyaiservices.yaml differs from crds/trustyaiservices.yaml: run `make crd`"
    );
}

#[test]
fn lint_is_clean() {
    let (ok, out, err) = helm(
        None,
        &[
            "lint",
            chart_dir().to_str().expect("path"),
            "--strict",
            "--kube-version",
            KUBE_VERSION,
        ],
    );
    assert!(ok, "helm lint failed:\n{out}\n{err}");
}

/// A ClusterIssuer without a name: refused, naming the fix.
#[test]
fn a_cluster_issuer_without_a_name_is_refused() {
    let err = refused(&[
        "--set",
        "certs.mode=certManager",
        "--set",
        "certs.issuerKind=ClusterIssuer",
    ]);
    assert!(
        err.contains("certs.issuerKind=ClusterIssuer needs certs.issuerName"),
        "{err}"
    );
}

/// A named ClusterIssuer is referenced, and the chart renders no Issuer of its own.
#[test]
fn a_named_cluster_issuer_is_referenced_instead_of_the_charts_issuer() {
    let named = template(&NAMED_CLUSTER_ISSUER);
    assert!(
        named.contains("name: corporate-ca\n    kind: ClusterIssuer"),
        "{named}"
    );
    assert!(
        !named.contains("kind: Issuer\n"),
        "no Issuer rendered: {named}"
    );
}

/// Without an issuer named, the chart's own self-signed Issuer is rendered and referenced.
#[test]
fn without_an_issuer_named_the_charts_own_is_referenced() {
    let own = template(&["--set", "certs.mode=certManager"]);
    assert!(own.contains("kind: Issuer\n"), "{own}");
    assert!(
        own.contains("name: trustyai-trustyai-operator-selfsigned\n    kind: Issuer"),
        "{own}"
    );
}

#[test]
fn every_cluster_scoped_object_is_named_after_the_release() {
    let manifest = template(&[]);
    let cluster_scoped = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ];
    let mut seen = 0;
    for document in manifest.split("\n---") {
        let kind = document
            .lines()
            .find_map(|l| l.strip_prefix("kind: "))
            .unwrap_or_default();
        if !cluster_scoped.contains(&kind) {
            continue;
        }
        seen += 1;
        let name = document
            .lines()
            .find_map(|l| l.strip_prefix("  name: "))
            .unwrap_or_default();
        assert!(
            name.starts_with("trustyai-trustyai-operator"),
            "{kind} {name} is not named after the release"
        );
    }
    assert!(seen >= 7, "{seen} cluster-scoped objects");
    assert!(
        manifest.contains("--proxy-cluster-role=trustyai-trustyai-operator-proxy"),
        "the operator binds the release's proxy role"
    );
}
