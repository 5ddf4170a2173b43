//! The chart's RBAC is what the operator needs: the chart is installed with helm, then the
//! operator binary runs locally with exactly the chart ServiceAccount's permissions (the admin
//! credentials impersonating it) and reconciles a TrustyAIService to Ready. Taking one verb away
//! from the chart's ClusterRole is caught: the next TrustyAIService is not provisioned and says
//! why.

use crate::support;
use support::control_planes::{self, Concern};

use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::tas_api;
use support::operator::Operator;
use support::wait;

const RELEASE: &str = "rbac";
const FULLNAME: &str = "rbac-trustyai-operator";

/// Runs helm against `cp`; it must succeed.
fn helm(cp: &ControlPlane, args: &[&str]) {
    let (ok, _, err) = support::helm::helm(Some(cp), args);
    assert!(ok, "helm {args:?}: {err}");
}

/// A kubeconfig with the admin's credentials that impersonates the chart's ServiceAccount, so
/// every request carries exactly that account's permissions.
fn impersonating_kubeconfig(cp: &ControlPlane, ns: &str) -> PathBuf {
    let text = std::fs::read_to_string(&cp.kubeconfig).expect("kubeconfig");
    let user = format!(
        "    as: system:serviceaccount:{ns}:{FULLNAME}\n    as-groups:\n    - system:serviceaccounts\n    - system:serviceaccounts:{ns}\n    - system:authenticated\n"
    );
    let text = text.replacen("    client-key:", &format!("{user}    client-key:"), 1);
    let path = cp.dir.join(format!("kubeconfig-{FULLNAME}"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

async fn create_db_service(client: &kube::Client, ns: &str, name: &str) {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-db-credentials")},
        "stringData": {"databaseKind": "mariadb", "databaseUsername": "u", "databasePassword": "p",
                       "databaseService": "db", "databasePort": "3306", "databaseName": "trustyai"}
    });
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret).expect("secret"),
        )
        .await
        .expect("credentials Secret");
    let tas = json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": name},
        "spec": {"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}}
    });
    tas_api(client, ns, "v1")
        .create(
            &PostParams::default(),
            &serde_json::from_value(tas).expect("tas"),
        )
        .await
        .expect("TrustyAIService created");
}

fn condition(object: &DynamicObject, type_: &str) -> Option<Value> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// Waits until the API server's authorizer answers `allowed` for every `(verb, resource)` the
/// chart's ServiceAccount asks in `ns`: it applies RBAC changes from a watch, a moment after
/// they are written.
async fn wait_for_access(cp: &ControlPlane, ns: &str, checks: &[(&str, &str)], allowed: bool) {
    let account = format!("system:serviceaccount:{ns}:{FULLNAME}");
    let mut answers = Vec::new();
    let settled = wait::within(Duration::from_secs(30), async || {
        answers.clear();
        let mut settled = true;
        for (verb, resource) in checks {
            let (_, out, err) = cp.kubectl(
                &["auth", "can-i", verb, resource, "-n", ns, "--as", &account],
                None,
            );
            // `yes`, or `no` with an optional ` - reason`; an error prints neither.
            let answer = out.trim();
            settled &= if allowed {
                answer == "yes"
            } else {
                answer == "no" || answer.starts_with("no - ")
            };
            answers.push(format!("{verb} {resource}: {answer} {}", err.trim()));
        }
        settled.then_some(())
    })
    .await;
    assert!(
        settled.is_some(),
        "the authorizer did not settle on allowed={allowed} within 30s: {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_rbac_is_what_the_operator_needs() {
    let (_claim, cp, client, ns) =
        control_planes::shared_namespace(Concern::HelmRbac, "chart-rbac").await;
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/trustyai-operator");
    helm(
        cp,
        &[
            "install",
            RELEASE,
            chart.to_str().expect("path"),
            "--namespace",
            &ns,
        ],
    );

    // One verb of each role bound to the account: the authorizer's cache holds each role whole.
    wait_for_access(
        cp,
        &ns,
        &[
            ("create", "deployments.apps"),
            ("create", "leases.coordination.k8s.io"),
        ],
        true,
    )
    .await;
    let mut operator = start_with_the_charts_permissions(cp, &ns);

    let apps = cp.namespace(&client, "chart-rbac-apps").await;
    create_db_service(&client, &apps, "allowed").await;
    let tas = tas_api(&client, &apps, "v1");
    wait::within(Duration::from_secs(90), async || {
        let object = tas.get_opt("allowed").await.ok()??;
        (condition(&object, "Ready")?["status"] == "True").then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "allowed did not become Ready within 90s:\n{}",
            operator.logs()
        )
    });
    assert_nothing_was_forbidden(&operator);

    take_creating_deployments_away(cp);
    wait_for_access(
        cp,
        &apps,
        &[
            ("create", "deployments.apps"),
            ("patch", "deployments.apps"),
        ],
        false,
    )
    .await;

    create_db_service(&client, &apps, "denied").await;
    let reported = wait::within(Duration::from_secs(90), async || {
        let object = tas.get_opt("denied").await.ok()??;
        let provisioning = condition(&object, "ProvisioningSucceeded")?;
        (provisioning["status"] == "False"
            && provisioning["message"]
                .as_str()?
                .to_lowercase()
                .contains("forbidden"))
        .then_some(provisioning)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "denied did not report the refused Deployment within 90s:\n{}",
            operator.logs()
        )
    });
    eprintln!("with a verb missing: {reported}");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &apps);
    assert!(
        deployments.get_opt("denied").await.expect("get").is_none(),
        "no Deployment without the verb"
    );
    assert!(operator.stop().success());
}

/// Runs the operator with exactly the permissions of the chart's ServiceAccount in `ns` (the
/// admin credentials impersonating it) and the chart's names; waits until it is ready.
fn start_with_the_charts_permissions(cp: &ControlPlane, ns: &str) -> Operator {
    let kubeconfig = impersonating_kubeconfig(cp, ns);
    let flags = [
        "--service-name",
        "rbac-trustyai-operator-webhook",
        "--cert-secret",
        "rbac-trustyai-operator-webhook-tls",
        "--validating-webhook-configuration",
        "rbac-trustyai-operator-validating",
        "--mutating-webhook-configuration",
        "rbac-trustyai-operator-mutating",
        "--proxy-cluster-role",
        "rbac-trustyai-operator-proxy",
    ];
    let mut operator = Operator::launch(cp, ns, &flags)
        .kubeconfig(&kubeconfig)
        .start();
    operator.wait_ready(Duration::from_secs(90));
    operator
}

/// The operator's log has no request the chart's RBAC refused.
fn assert_nothing_was_forbidden(operator: &Operator) {
    let log = std::fs::read_to_string(&operator.log).expect("operator log");
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.to_lowercase().contains("forbidden"))
        .collect();
    assert!(
        refused.is_empty(),
        "the chart's RBAC refused something:\n{}",
        refused.join("\n")
    );
}

/// Takes `create` (and `patch`) on Deployments away from the chart's ClusterRole.
fn take_creating_deployments_away(cp: &ControlPlane) {
    let (ok, out, err) = cp.kubectl(&["get", "clusterrole", FULLNAME, "-o", "json"], None);
    assert!(ok, "{err}");
    let mut role: Value = serde_json::from_str(&out).expect("role json");
    for rule in role["rules"].as_array_mut().expect("rules") {
        if rule["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "deployments"))
        {
            let verbs: Vec<Value> = rule["verbs"]
                .as_array()
                .expect("verbs")
                .iter()
                .filter(|v| *v != "create" && *v != "patch")
                .cloned()
                .collect();
            rule["verbs"] = Value::Array(verbs);
        }
    }
    let (ok, _, err) = cp.kubectl(&["replace", "-f", "-"], Some(&role.to_string()));
    assert!(ok, "{err}");
}
