//! The chart's values: the schema refuses what is misspelled, the chart's README documents each,
//! each lands where it belongs in what is rendered (and the API server accepts it), and the
//! chart refuses contradictory sets with a message that names the fix.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Duration;

use serde_json::{Value, json};
use support::ControlPlane;
use support::temp::TempDir;
use support::wait;

use super::{chart_dir, documents, establish_fixture_crds, names, of_kind, one, refused, template};

#[test]
fn values_schema_rejects_a_misspelled_value() {
    let err = refused(&["--set", "replicaCont=2"]);
    assert!(
        err.contains("replicaCont") && err.contains("not allowed"),
        "{err}"
    );
    let err = refused(&["--set", "certs.mode=letsencrypt"]);
    assert!(err.contains("/certs/mode"), "{err}");
}

#[test]
fn values_table_documents_every_value() {
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values");
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("chart README");
    let mut stack: Vec<String> = Vec::new();
    let mut commented = false;
    for line in values.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("# --") {
            commented = true;
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        if trimmed.starts_with('-') || trimmed.starts_with('#') || key.contains(' ') {
            continue;
        }
        let depth = (line.len() - trimmed.len()) / 2;
        stack.truncate(depth);
        stack.push(key.to_string());
        let path = stack.join(".");
        // Free-form Kubernetes objects (ResourceRequirements, PodSecurityContext,
        // SecurityContext), each documented whole.
        let free_form = ["resources", "securityContext", "containerSecurityContext"];
        if depth > 0 && free_form.contains(&stack[0].as_str()) {
            continue;
        }
        assert!(commented, "values.yaml: {path} has no `# --` comment");
        assert!(
            readme.contains(&format!("| `{path}` |")),
            "charts/trustyai-operator/README.md: no row for {path}"
        );
        commented = false;
    }
}

/// Server-side dry run of `manifest`, retried while kubectl cannot map a kind yet (Established
/// comes before the kinds show in discovery, which kubectl maps them by).
async fn dry_run(cp: &ControlPlane, manifest: &str) -> (bool, String, String) {
    let apply = [
        "apply",
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
    ];
    let mut last = None;
    let answer = wait::within(Duration::from_secs(30), async || {
        let (ok, out, err) = cp.kubectl(&apply, Some(manifest));
        let unmapped =
            err.contains("no matches for kind") || err.contains("ensure CRDs are installed first");
        if ok || !unmapped {
            return Some((ok, out, err));
        }
        last = Some((ok, out, err));
        None
    })
    .await;
    answer.or(last).expect("at least one dry run")
}

/// `helm template` with `values` as a values file (in a folder of this call's own: tests run
/// side by side).
fn template_values(values: &Value) -> String {
    let dir = TempDir::new("values");
    let file = dir.join("values.yaml");
    std::fs::write(&file, trustyai_crds::manifests::to_yaml(values)).expect("write values");
    template(&["-f", file.to_str().expect("path")])
}

/// The values admins expect from cert-manager's chart, all at once.
fn every_value_admins_expect() -> Value {
    json!({
        "replicaCount": 3,
        "certs": {"mode": "existingSecret", "existingSecret": "my-tls"},
        "webhook": {"clientCaSecret": "client-ca"},
        "extraArgs": ["--lease-duration=30s"],
        "extraEnv": [
            {"name": "EXTRA_ONE", "value": "1"},
            {
                "name": "FROM_SECRET",
                "valueFrom": {"secretKeyRef": {"name": "extra", "key": "token", "optional": true}},
            },
        ],
        "extraVolumes": [
            {"name": "extra-config", "configMap": {"name": "extra-config", "optional": true}},
        ],
        "extraVolumeMounts": [
            {"name": "extra-config", "mountPath": "/etc/extra", "readOnly": true},
        ],
        // Every key of the default too: helm merges a given map into the default one.
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "runAsNonRoot": true, "runAsUser": 65532, "capabilities": {"drop": ["ALL"]},
        },
        "podDisruptionBudget": {"minAvailable": 2},
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "trustyai-operator"}},
        }],
        "serviceMonitor": {
            "enabled": true, "labels": {"release": "prometheus"}, "scrapeTimeout": "10s",
        },
        "serviceAccount": {
            "create": false, "name": "platform-operator",
            "annotations": {
                "iam.gke.io/gcp-service-account": "operator@example.iam.gserviceaccount.com",
            },
        },
        "livenessProbe": {
            "initialDelaySeconds": 5, "periodSeconds": 20, "timeoutSeconds": 3,
            "failureThreshold": 6,
        },
        "readinessProbe": {"enabled": false},
    })
}

/// The values of [`every_value_admins_expect`] each land where they belong.
#[test]
fn every_value_admins_expect_renders_where_it_belongs() {
    let values = every_value_admins_expect();
    let objects = documents(&template_values(&values));

    let deployment = one(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_the_pod_follows(&deployment["spec"]["template"]["spec"], &values);

    let pdb = &one(&objects, "PodDisruptionBudget")["spec"];
    assert_eq!(pdb["minAvailable"], 2);
    assert!(pdb.get("maxUnavailable").is_none(), "{pdb:#}");

    let monitor = one(&objects, "ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(
        monitor["metadata"]["labels"]["app.kubernetes.io/instance"],
        "trustyai"
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0],
        json!({"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"})
    );

    // An existing ServiceAccount: none rendered, the chart's RBAC bound to it.
    assert!(of_kind(&objects, "ServiceAccount").is_empty());
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for binding in of_kind(&objects, kind) {
            assert_eq!(
                binding["subjects"],
                json!([{
                    "kind": "ServiceAccount", "name": "platform-operator",
                    "namespace": "trustyai-system",
                }]),
                "{kind}"
            );
        }
    }
}

/// The operator's pod rendered with [`every_value_admins_expect`]: the extra arguments,
/// environment, volumes and mounts after the chart's own, the security contexts, spread,
/// ServiceAccount and probes as given.
fn assert_the_pod_follows(pod: &Value, values: &Value) {
    let container = &pod["containers"][0];
    let args = container["args"].as_array().expect("args");
    assert_eq!(
        args[args.len() - 2..],
        [json!("--inject-ca-bundle"), json!("--lease-duration=30s")],
        "extraArgs after the chart's own: {args:?}"
    );
    let env = names(&container["env"]);
    assert_eq!(env[0], "POD_NAMESPACE");
    assert_eq!(env[env.len() - 2..], ["EXTRA_ONE", "FROM_SECRET"]);
    let env = container["env"].as_array().expect("env");
    assert_eq!(
        env[env.len() - 2..],
        values["extraEnv"].as_array().expect("extraEnv")[..]
    );
    assert_eq!(
        names(&pod["volumes"]),
        ["webhook-tls", "webhook-client-ca", "extra-config"]
    );
    assert_eq!(pod["volumes"][2], values["extraVolumes"][0]);
    assert_eq!(
        names(&container["volumeMounts"]),
        ["webhook-tls", "webhook-client-ca", "extra-config"]
    );
    assert_eq!(container["volumeMounts"][2], values["extraVolumeMounts"][0]);
    assert_eq!(pod["securityContext"], values["securityContext"]);
    assert_eq!(
        container["securityContext"],
        values["containerSecurityContext"]
    );
    assert_eq!(
        pod["topologySpreadConstraints"],
        values["topologySpreadConstraints"]
    );
    assert_eq!(pod["serviceAccountName"], "platform-operator");
    assert_eq!(
        container["livenessProbe"],
        json!({
            "httpGet": {"path": "/healthz", "port": "ops"},
            "initialDelaySeconds": 5, "periodSeconds": 20, "timeoutSeconds": 3,
            "failureThreshold": 6,
        })
    );
    assert!(container.get("readinessProbe").is_none(), "{container:#}");
}

/// The API server accepts (in a server-side dry run) what [`every_value_admins_expect`]
/// renders.
#[tokio::test]
async fn the_api_server_accepts_the_chart_rendered_with_every_value_admins_expect() {
    let values = every_value_admins_expect();
    let manifest = template_values(&values);
    // The dry run applies the chart's CRD over the live one, which other tests change.
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let crd = establish_fixture_crds(cp, "servicemonitor.yaml");
    let (ok, _, err) = cp.kubectl(&["create", "namespace", "trustyai-system"], None);
    assert!(ok || err.contains("AlreadyExists"), "{err}");
    let (accepted, out, err) = dry_run(cp, &manifest).await;
    // The other tests run the operator, which would act on ServiceMonitors: leave no such API.
    let (ok, _, remove) = cp.kubectl(&["delete", "-f", &crd, "--wait=true"], None);
    assert!(ok, "{remove}");
    assert!(
        accepted,
        "the API server refused the chart rendered with {values:#}:\n{err}\n{out}"
    );
}

/// The pod's volumes and the container's volumeMounts in every combination of the certificate
/// mount, the client CA mount and extra ones, including none.
#[test]
fn every_volume_combination_renders_with_matching_mounts() {
    for mode in ["selfSigned", "certManager"] {
        for client_ca in [false, true] {
            for extra in [false, true] {
                let mode_set = format!("certs.mode={mode}");
                let mut args = vec!["--set", mode_set.as_str()];
                if client_ca {
                    args.extend(["--set", "webhook.clientCaSecret=client-ca"]);
                }
                if extra {
                    args.extend([
                        "--set-json",
                        r#"extraVolumes=[{"name":"scratch","emptyDir":{}}]"#,
                        "--set-json",
                        r#"extraVolumeMounts=[{"name":"scratch","mountPath":"/scratch"}]"#,
                    ]);
                }
                let objects = documents(&template(&args));
                let pod = &one(&objects, "Deployment")["spec"]["template"]["spec"];
                let mut expected = Vec::new();
                if mode != "selfSigned" {
                    expected.push("webhook-tls");
                }
                if client_ca {
                    expected.push("webhook-client-ca");
                }
                if extra {
                    expected.push("scratch");
                }
                let what = format!("{mode}, client CA {client_ca}, extra {extra}");
                assert_eq!(names(&pod["volumes"]), expected, "{what}: {pod:#}");
                assert_eq!(
                    names(&pod["containers"][0]["volumeMounts"]),
                    expected,
                    "{what}"
                );
                if expected.is_empty() {
                    assert!(pod.get("volumes").is_none(), "{what}");
                    assert!(pod["containers"][0].get("volumeMounts").is_none(), "{what}");
                }
            }
        }
    }
}

/// The spec of the PodDisruptionBudget rendered with `args`, if one is.
fn rendered_pdb(args: &[&str]) -> Option<Value> {
    of_kind(&documents(&template(args)), "PodDisruptionBudget")
        .first()
        .map(|pdb| pdb["spec"].clone())
}

/// A PodDisruptionBudget only over 2 or more replicas and only when enabled.
#[test]
fn a_disruption_budget_is_rendered_only_over_two_replicas_when_enabled() {
    assert_eq!(rendered_pdb(&[]), None, "no PDB over one replica");
    assert_eq!(
        rendered_pdb(&[
            "--set",
            "replicaCount=2",
            "--set",
            "podDisruptionBudget.enabled=false"
        ]),
        None
    );
}

/// The PodDisruptionBudget carries one bound: maxUnavailable 1 by default, or the given one.
#[test]
fn the_disruption_budget_carries_the_one_bound_its_values_give() {
    let default = rendered_pdb(&["--set", "replicaCount=2"]).expect("a PDB at 2 replicas");
    assert_eq!(default["maxUnavailable"], 1);
    assert!(default.get("minAvailable").is_none());
    let percent = rendered_pdb(&[
        "--set",
        "replicaCount=2",
        "--set",
        "podDisruptionBudget.minAvailable=50%",
    ])
    .expect("a PDB");
    assert_eq!(percent["minAvailable"], "50%");
    assert!(percent.get("maxUnavailable").is_none());
}

/// The pod's topologySpreadConstraints rendered with `args`.
fn rendered_spread(args: &[&str]) -> Value {
    one(&documents(&template(args)), "Deployment")["spec"]["template"]["spec"]
        ["topologySpreadConstraints"]
        .clone()
}

/// The default spread only over 2 or more replicas and without topologySpreadConstraints.
#[test]
fn the_default_topology_spread_applies_only_over_two_replicas() {
    assert_eq!(
        rendered_spread(&[]),
        Value::Null,
        "no spread over one replica"
    );
    assert_eq!(
        rendered_spread(&["--set", "replicaCount=2"])[0]["topologyKey"],
        "kubernetes.io/hostname"
    );
}

/// The given topologySpreadConstraints at any replica count.
#[test]
fn given_topology_spread_constraints_apply_at_any_replica_count() {
    let given = json!([{
        "maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
    }]);
    let given_set = format!("topologySpreadConstraints={given}");
    assert_eq!(
        rendered_spread(&["--set-json", &given_set]),
        given,
        "given, at one replica"
    );
    assert_eq!(
        rendered_spread(&["--set", "replicaCount=2", "--set-json", &given_set]),
        given
    );
}

/// The ServiceAccount's name, annotations and token mount, and the pod and bindings on it.
#[test]
fn the_service_account_follows_its_values() {
    let objects = documents(&template(&[
        "--set",
        "serviceAccount.name=operator",
        "--set",
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/op",
        "--set",
        "serviceAccount.automountServiceAccountToken=false",
    ]));
    let account = one(&objects, "ServiceAccount");
    assert_eq!(account["metadata"]["name"], "operator");
    assert_eq!(
        account["metadata"]["annotations"],
        json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/op"})
    );
    assert_eq!(account["automountServiceAccountToken"], false);
    assert_eq!(
        one(&objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"],
        "operator"
    );
    for binding in of_kind(&objects, "ClusterRoleBinding")
        .into_iter()
        .chain(of_kind(&objects, "RoleBinding"))
    {
        assert_eq!(binding["subjects"][0]["name"], "operator");
    }
}

/// Both minAvailable and maxUnavailable, at any replica count: refused, naming the fix.
#[test]
fn a_contradictory_disruption_budget_is_refused() {
    for replicas in ["replicaCount=1", "replicaCount=3"] {
        let err = refused(&[
            "--set",
            replicas,
            "--set",
            "podDisruptionBudget.minAvailable=2",
            "--set",
            "podDisruptionBudget.maxUnavailable=1",
        ]);
        assert!(
            err.contains("podDisruptionBudget: set minAvailable or maxUnavailable, not both"),
            "{err}"
        );
    }
}

/// An existing ServiceAccount (`create=false`) without its name: refused, naming the fix.
#[test]
fn an_existing_service_account_without_a_name_is_refused() {
    let err = refused(&["--set", "serviceAccount.create=false"]);
    assert!(
        err.contains("serviceAccount.name is required with serviceAccount.create=false"),
        "{err}"
    );
}
