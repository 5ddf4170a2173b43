//! The Helm chart, with the helm built from its Go module and the real API server: lint, install
//! in every certificate mode, values schema, the CRD copy, install,
//! upgrade with a CRD that gained a field, uninstall that keeps the CRD and every
//! TrustyAIService, and installs where the Go operator's CRD and objects already exist (left
//! alone or adopted, two releases side by side).

use crate::support;
use support::control_planes::{self, Concern};

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::ControlPlane;
use support::cluster::tas_api;
use support::helm::{chart_dir, helm};
use trustyai_crds::contract::CRD_NAME;

const KUBE_VERSION: &str = "1.37.2";

/// Deletes the CRD (and with it every TrustyAIService) so a test starts from a cluster without it.
fn delete_crd(cp: &ControlPlane) {
    let (ok, out, err) = cp.kubectl(
        &[
            "delete",
            "crd",
            CRD_NAME,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=120s",
        ],
        None,
    );
    assert!(ok, "deleting the CRD: {out}{err}");
}

fn wait_established(cp: &ControlPlane) {
    let (ok, out, err) = cp.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD_NAME}"),
        ],
        None,
    );
    assert!(ok, "the CRD established: {out}{err}");
}

/// `helm template` without `--kube-version`: the helm of `dev/control-plane/` is built, as
/// helm's own release builds are, to assume its client-go's Kubernetes version, which the
/// chart's `kubeVersion` accepts. Without the `helm test` hooks: their pod names a
/// ServiceAccount that a server-side dry run does not create
/// (`real_node::chart` installs them and runs `helm test`).
fn template(extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        "trustyai",
        chart.to_str().expect("path"),
        "--namespace",
        "trustyai-system",
        "--no-hooks",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm(None, &args);
    assert!(ok, "helm template {extra:?} failed: {err}");
    out
}

/// `helm install <release>` of the chart into `ns` (not waiting for the operator's pod, which
/// never runs here), with `extra` arguments; asserts it succeeds and returns what helm printed.
fn install(cp: &ControlPlane, release: &str, ns: &str, extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "install",
        release,
        chart.to_str().expect("path"),
        "--namespace",
        ns,
        "--wait=false",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = helm(Some(cp), &args);
    assert!(ok, "helm install {release} {extra:?} failed:\n{out}\n{err}");
    out
}

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

#[test]
fn values_schema_rejects_a_misspelled_value() {
    let chart = chart_dir();
    let (ok, _, err) = helm(
        None,
        &[
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "replicaCont=2",
        ],
    );
    assert!(!ok, "a misspelled value was accepted");
    assert!(
        err.contains("replicaCont") && err.contains("not allowed"),
        "{err}"
    );
    let (ok, _, err) = helm(
        None,
        &[
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "certs.mode=letsencrypt",
        ],
    );
    assert!(!ok && err.contains("/certs/mode"), "{err}");
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

#[tokio::test]
async fn every_certificate_mode_installs_and_uninstalls() {
    // Each install brings the chart's CRD, which other tests change.
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let client = cp.client().await;
    // cert-manager's kinds, as minimal CRDs, so its Issuer and Certificate can be created.
    let (ok, applied, err) = cp.kubectl(
        &[
            "apply",
            "--server-side",
            "-o",
            "name",
            "-f",
            &format!(
                "{}/tests/fixtures/crds/cert-manager.yaml",
                env!("CARGO_MANIFEST_DIR")
            ),
        ],
        None,
    );
    assert!(ok, "{err}");
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    wait.extend(applied.lines());
    let (ok, out, err) = cp.kubectl(&wait, None);
    assert!(ok, "cert-manager's CRDs established: {out}{err}");
    for (i, extra) in [
        vec![],
        vec!["--set", "certs.mode=certManager"],
        vec![
            "--set",
            "certs.mode=certManager",
            "--set",
            "certs.issuerKind=ClusterIssuer",
            "--set",
            "certs.issuerName=corporate-ca",
        ],
        vec!["--set", "crds.install=false"],
        vec!["--set", "certs.mode=openshift"],
        vec![
            "--set",
            "certs.mode=existingSecret",
            "--set",
            "certs.existingSecret=my-tls",
        ],
        vec![
            "--set",
            "serviceMonitor.enabled=false",
            "--set",
            "networkPolicy.enabled=true",
        ],
    ]
    .into_iter()
    .enumerate()
    {
        // A CRD kept from the previous release carries that release's ownership metadata.
        delete_crd(cp);
        let ns = cp.namespace(&client, "modes").await;
        let release = format!("mode-{i}");
        install(cp, &release, &ns, &extra);
        let (ok, out, err) = helm(Some(cp), &["uninstall", &release, "--namespace", &ns]);
        assert!(ok, "helm uninstall with {extra:?} failed:\n{err}\n{out}");
    }
    delete_crd(cp);
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = cp.kubectl(&apply, Some(manifest));
        let unmapped =
            err.contains("no matches for kind") || err.contains("ensure CRDs are installed first");
        if ok || !unmapped || Instant::now() > deadline {
            return (ok, out, err);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The objects of a rendered manifest, parsed.
fn documents(manifest: &str) -> Vec<Value> {
    manifest
        .split("\n---")
        .flat_map(|document| {
            trustyai_crds::manifests::parse_documents(document)
                .unwrap_or_else(|e| panic!("{e}: {document}"))
        })
        .filter(|object| object["kind"].is_string())
        .collect()
}

/// Every object of `kind` in `objects`.
fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of `kind` in `objects`.
fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "one {kind}: {found:#?}");
    found[0]
}

/// The `name`s of a list such as a pod's volumes, in order; empty when the list is absent.
fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| items.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}

/// `helm template` with `values` as a values file.
fn template_values(values: &Value) -> String {
    let dir = std::env::temp_dir().join(format!("trustyai-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("values.yaml");
    std::fs::write(&file, trustyai_crds::manifests::to_yaml(values)).expect("write values");
    let manifest = template(&["-f", file.to_str().expect("path")]);
    let _ = std::fs::remove_dir_all(&dir);
    manifest
}

/// The values admins expect from cert-manager's chart, all at once: the API server accepts
/// what they render, and each lands where it belongs.
#[tokio::test]
async fn every_pod_and_monitoring_value_renders_where_it_belongs_and_the_api_server_accepts_it() {
    let values = json!({
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
    });
    let manifest = template_values(&values);
    let objects = documents(&manifest);

    let deployment = one(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
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

    // The dry run applies the chart's CRD over the live one, which other tests change.
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let crd = format!(
        "{}/tests/fixtures/crds/servicemonitor.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, _, err) = cp.kubectl(&["apply", "--server-side", "-f", &crd], None);
    assert!(ok, "{err}");
    let (ok, out, err) = cp.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/servicemonitors.monitoring.coreos.com",
        ],
        None,
    );
    assert!(ok, "the ServiceMonitor CRD established: {out}{err}");
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
fn volumes_and_mounts_render_in_every_combination() {
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

/// A PodDisruptionBudget only over 2 or more replicas and only when enabled, with one bound;
/// the default spread only without topologySpreadConstraints; the ServiceAccount's name.
#[test]
fn disruption_budget_spread_and_service_account_follow_their_values() {
    let pdb = |args: &[&str]| -> Option<Value> {
        of_kind(&documents(&template(args)), "PodDisruptionBudget")
            .first()
            .map(|pdb| pdb["spec"].clone())
    };
    assert_eq!(pdb(&[]), None, "no PDB over one replica");
    assert_eq!(
        pdb(&[
            "--set",
            "replicaCount=2",
            "--set",
            "podDisruptionBudget.enabled=false"
        ]),
        None
    );
    let default = pdb(&["--set", "replicaCount=2"]).expect("a PDB at 2 replicas");
    assert_eq!(default["maxUnavailable"], 1);
    assert!(default.get("minAvailable").is_none());
    let percent = pdb(&[
        "--set",
        "replicaCount=2",
        "--set",
        "podDisruptionBudget.minAvailable=50%",
    ])
    .expect("a PDB");
    assert_eq!(percent["minAvailable"], "50%");
    assert!(percent.get("maxUnavailable").is_none());

    let spread = |args: &[&str]| -> Value {
        one(&documents(&template(args)), "Deployment")["spec"]["template"]["spec"]
            ["topologySpreadConstraints"]
            .clone()
    };
    assert_eq!(spread(&[]), Value::Null, "no spread over one replica");
    assert_eq!(
        spread(&["--set", "replicaCount=2"])[0]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let given = json!([{
        "maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
    }]);
    let given_set = format!("topologySpreadConstraints={given}");
    assert_eq!(
        spread(&["--set-json", &given_set]),
        given,
        "given, at one replica"
    );
    assert_eq!(
        spread(&["--set", "replicaCount=2", "--set-json", &given_set]),
        given
    );

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

/// Values sets the chart refuses, each with a message that names the fix.
#[test]
fn contradictory_budget_and_unnamed_existing_service_account_are_refused() {
    let chart = chart_dir();
    let refused = |extra: &[&str]| -> String {
        let mut args = vec![
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
        ];
        args.extend_from_slice(extra);
        let (ok, out, err) = helm(None, &args);
        assert!(!ok, "rendered with {extra:?}:\n{out}");
        err
    };
    // Both minAvailable and maxUnavailable, at any replica count.
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
    let err = refused(&["--set", "serviceAccount.create=false"]);
    assert!(
        err.contains("serviceAccount.name is required with serviceAccount.create=false"),
        "{err}"
    );
}

#[tokio::test]
async fn install_upgrade_and_uninstall_keep_the_crd_and_every_trustyaiservice() {
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    delete_crd(cp);
    let client = cp.client().await;
    let ns = cp.namespace(&client, "helm").await;
    let chart = chart_dir();
    let out = install(cp, "trustyai", &ns, &[]);
    assert!(
        out.contains("Create a first TrustyAIService"),
        "NOTES.txt shown: {out}"
    );

    // Every object exists.
    for (kind, name, namespaced) in [
        ("deployment", "trustyai-trustyai-operator", true),
        ("serviceaccount", "trustyai-trustyai-operator", true),
        ("service", "trustyai-trustyai-operator-webhook", true),
        ("configmap", "trustyai-service-operator-config", true),
        ("role", "trustyai-trustyai-operator", true),
        ("rolebinding", "trustyai-trustyai-operator", true),
        ("clusterrole", "trustyai-trustyai-operator", false),
        ("clusterrolebinding", "trustyai-trustyai-operator", false),
        ("clusterrole", "trustyai-trustyai-operator-proxy", false),
        ("clusterrole", "trustyai-trustyai-operator-editor", false),
        ("clusterrole", "trustyai-trustyai-operator-viewer", false),
        (
            "validatingwebhookconfiguration",
            "trustyai-trustyai-operator-validating",
            false,
        ),
        (
            "mutatingwebhookconfiguration",
            "trustyai-trustyai-operator-mutating",
            false,
        ),
        ("crd", CRD_NAME, false),
    ] {
        let mut args = vec!["get", kind, name];
        if namespaced {
            args.extend(["-n", ns.as_str()]);
        }
        let (ok, _, err) = cp.kubectl(&args, None);
        assert!(ok, "{kind}/{name} missing after helm install: {err}");
    }

    // No operator pod runs here (no container runtime), so let the registrations ignore their
    // unreachable webhook; v1-only traffic needs no conversion.
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai",
            chart.to_str().expect("path"),
            "--namespace",
            &ns,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade failed:\n{out}\n{err}");
    let (ok, out, err) = cp.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD_NAME}"),
        ],
        None,
    );
    assert!(ok, "the chart's CRD established: {out}{err}");
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let tas = tas_api(&client, &ns, "v1");
    let keep_me: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": "keep-me"},
        "spec": support::samples::minimal()
    }))
    .expect("tas");
    // The API server reloads webhook registrations from a watch: until it has seen the upgrade,
    // the installed Fail policy still refuses the create.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match tas.create(&PostParams::default(), &keep_me).await {
            Ok(_) => break,
            Err(kube::Error::Api(status))
                if status.message.contains("failed calling webhook")
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("TrustyAIService created with failurePolicy=Ignore: {e}"),
        }
    }

    // Upgrade to a chart whose CRD gained a field.
    let upgraded =
        std::env::temp_dir().join(format!("trustyai-chart-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&upgraded);
    copy_dir(&chart, &upgraded);
    let crd_file = upgraded.join("files/trustyaiservices.yaml");
    let text = std::fs::read_to_string(&crd_file).expect("crd copy");
    let marker = "              replicas:\n";
    assert!(text.contains(marker), "the CRD copy has spec.replicas");
    let new_field = "              newField:\n                description: A field added by the upgraded chart.\n                type: string\n";
    std::fs::write(
        &crd_file,
        text.replacen(marker, &format!("{new_field}{marker}"), 2),
    )
    .expect("write");
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai",
            upgraded.to_str().expect("path"),
            "--namespace",
            &ns,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade to the new CRD failed:\n{out}\n{err}");
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    let v1 = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == "v1")
        .expect("v1");
    let spec_props = v1
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.properties.as_ref())
        .expect("spec properties");
    assert!(
        spec_props.contains_key("newField"),
        "helm upgrade updated the CRD"
    );
    tas.get("keep-me")
        .await
        .expect("the TrustyAIService survived the upgrade");

    let (ok, out, err) = helm(Some(cp), &["uninstall", "trustyai", "--namespace", &ns]);
    assert!(ok, "helm uninstall failed:\n{out}\n{err}");
    // helm returns once its deletes are accepted, and a CRD it had deleted would at once carry
    // a deletionTimestamp (its cleanup finalizer then deletes every TrustyAIService): so the
    // CRD and the TrustyAIService are checked for one, right away.
    let (ok, _, err) = cp.kubectl(
        &["get", "deployment", "trustyai-trustyai-operator", "-n", &ns],
        None,
    );
    assert!(
        !ok && err.contains("NotFound"),
        "helm uninstall deleted the release's Deployment: {err}"
    );
    let crd = crd_api
        .get(CRD_NAME)
        .await
        .expect("the CRD survived helm uninstall");
    assert!(
        crd.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the CRD"
    );
    let kept = tas
        .get("keep-me")
        .await
        .expect("the TrustyAIService survived helm uninstall");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the TrustyAIService"
    );
    let _ = std::fs::remove_dir_all(&upgraded);
}

#[test]
fn a_cluster_issuer_without_a_name_is_refused_and_a_named_one_is_referenced() {
    let chart = chart_dir();
    let (ok, _, err) = helm(
        None,
        &[
            "template",
            "t",
            chart.to_str().expect("path"),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "certs.mode=certManager",
            "--set",
            "certs.issuerKind=ClusterIssuer",
        ],
    );
    assert!(
        !ok && err.contains("certs.issuerKind=ClusterIssuer needs certs.issuerName"),
        "{err}"
    );
    let named = template(&[
        "--set",
        "certs.mode=certManager",
        "--set",
        "certs.issuerKind=ClusterIssuer",
        "--set",
        "certs.issuerName=corporate-ca",
    ]);
    assert!(
        named.contains("name: corporate-ca\n    kind: ClusterIssuer"),
        "{named}"
    );
    assert!(
        !named.contains("kind: Issuer\n"),
        "no Issuer rendered: {named}"
    );
    let own = template(&["--set", "certs.mode=certManager"]);
    assert!(own.contains("kind: Issuer\n"), "{own}");
    assert!(
        own.contains("name: trustyai-trustyai-operator-selfsigned\n    kind: Issuer"),
        "{own}"
    );
}

/// The metric names the operator exports (from its own registry), to hold the chart's alerts and
/// dashboard to.
fn exported_metric_names() -> std::collections::BTreeSet<String> {
    let text = trustyai_operator::metrics::Metrics::new()
        .render(trustyai_webhooks::MetricsFormat::PrometheusText);
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Every `trustyai_operator_*` or `process_*` name in `expr`, without the histogram suffixes.
fn metric_names_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("trustyai_operator_") || word.starts_with("process_"))
        .map(|word| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .filter(|base| base.ends_with("_seconds"))
                .unwrap_or(word)
                .to_owned()
        })
        .collect()
}

/// The PrometheusRule the chart renders passes Prometheus' own rule checker (`promcheck rules`:
/// rulefmt, which parses every PromQL expression), and its alerts and the dashboard's panels
/// use only metrics the operator exports.
#[test]
fn alerts_pass_prometheus_rule_checker_and_use_exported_metrics() {
    let manifest = template(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
    ]);
    let exported = exported_metric_names();
    let mut rules_doc = None;
    let mut dashboard = None;
    for document in manifest.split("\n---") {
        let Some(value) = trustyai_crds::manifests::parse_documents(document)
            .ok()
            .and_then(|docs| docs.into_iter().next())
        else {
            continue;
        };
        match value["kind"].as_str() {
            Some("PrometheusRule") => rules_doc = Some(value["spec"].clone()),
            Some("ConfigMap") if value["metadata"]["labels"]["grafana_dashboard"] == "1" => {
                dashboard = value["data"]["trustyai-operator.json"]
                    .as_str()
                    .map(str::to_owned)
            }
            _ => {}
        }
    }
    let rules = rules_doc.expect("a PrometheusRule");
    let dir = std::env::temp_dir().join(format!("trustyai-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("rules.yaml");
    std::fs::write(&file, trustyai_crds::manifests::to_yaml(&rules)).expect("write");
    let promcheck = trustyai_local_cluster::binary("promcheck").unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(promcheck)
        .arg("rules")
        .arg(&file)
        .output()
        .expect("promcheck runs");
    assert!(
        out.status.success(),
        "Prometheus' rule checker refused the chart's rules: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        trustyai_crds::manifests::to_yaml(&rules)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("8 rules found"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut used = Vec::new();
    for rule in rules["groups"][0]["rules"].as_array().expect("rules") {
        used.extend(metric_names_in(rule["expr"].as_str().expect("expr")));
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&dashboard.expect("the dashboard ConfigMap")).expect("dashboard JSON");
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            used.extend(metric_names_in(target["expr"].as_str().expect("expr")));
        }
    }
    let unknown: Vec<&String> = used
        .iter()
        .filter(|name| !exported.contains(*name))
        .collect();
    assert!(
        unknown.is_empty(),
        "not exported: {unknown:?} (exported: {exported:?})"
    );
    let _ = std::fs::remove_dir_all(&dir);
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

/// The Go operator's CRD (`tests/fixtures/crds/go-operator-trustyaiservices.yaml`, applied with
/// `kubectl apply` as its kustomize manifests are) and TrustyAIServices stored under it, one of
/// them invalid by our rules. A plain install is refused by Helm; with `crds.install=false` two
/// releases install side by side and leave the CRD and the objects alone; once the CRD carries
/// the release's ownership metadata (the chart README's commands), an upgrade with the CRD adopts
/// it and the objects stay.
#[tokio::test]
async fn installs_where_the_go_operators_crd_and_objects_exist() {
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    let client = cp.client().await;
    delete_crd(cp);
    let fixture = format!(
        "{}/tests/fixtures/crds/go-operator-trustyaiservices.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, out, err) = cp.kubectl(&["apply", "-f", &fixture], None);
    assert!(ok, "the Go operator's CRD: {out}{err}");
    wait_established(cp);
    let apps = cp.namespace(&client, "go-apps").await;
    let tas = tas_api(&client, &apps, "v1");
    let mut stored = Vec::new();
    for (name, size) in [("kept", "1Gi"), ("odd-size", "abc")] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name},
            "spec": {"storage": {"format": "PVC", "folder": "/inputs", "size": size}, "metrics": {"schedule": "5s"}}
        }))
        .expect("tas");
        // Established comes a moment before the API serves the kind.
        let deadline = Instant::now() + Duration::from_secs(30);
        let created = loop {
            match tas.create(&PostParams::default(), &object).await {
                Ok(created) => break created,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => panic!("a TrustyAIService under the Go CRD: {e}"),
            }
        };
        stored.push((name, created.metadata.uid.expect("uid")));
    }

    let chart = chart_dir();
    let chart = chart.to_str().expect("path");
    let ns_a = cp.namespace(&client, "helm-a").await;
    let ns_b = cp.namespace(&client, "helm-b").await;
    let (ok, out, err) = helm(
        Some(cp),
        &["install", "refused", chart, "--namespace", &ns_a],
    );
    assert!(
        !ok && err.contains("invalid ownership metadata") && err.contains(CRD_NAME),
        "Helm refuses to take over a CRD it does not own:\n{out}\n{err}"
    );
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
        install(
            cp,
            release,
            ns,
            &[
                "--set",
                "crds.install=false",
                "--set",
                "webhook.failurePolicy=Ignore",
            ],
        );
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key("controller-gen.kubebuilder.io/version")
            && !annotations.contains_key("meta.helm.sh/release-name"),
        "crds.install=false left the Go operator's CRD alone: {annotations:?}"
    );
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
        for (kind, name) in [
            ("clusterrole", format!("{release}-trustyai-operator")),
            ("clusterrole", format!("{release}-trustyai-operator-proxy")),
            ("clusterrole", format!("{release}-trustyai-operator-editor")),
            ("clusterrolebinding", format!("{release}-trustyai-operator")),
            (
                "validatingwebhookconfiguration",
                format!("{release}-trustyai-operator-validating"),
            ),
        ] {
            let (ok, _, err) = cp.kubectl(&["get", kind, &name], None);
            assert!(ok, "{kind}/{name} of {release} in {ns}: {err}");
        }
    }

    // Adopt: the ownership metadata the chart README gives, then the CRD comes with the chart.
    let (ok, out, err) = cp.kubectl(
        &[
            "label",
            "crd",
            CRD_NAME,
            "app.kubernetes.io/managed-by=Helm",
            "--overwrite",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = cp.kubectl(
        &[
            "annotate",
            "crd",
            CRD_NAME,
            "--overwrite",
            "meta.helm.sh/release-name=trustyai-a",
            &format!("meta.helm.sh/release-namespace={ns_a}"),
            "kubectl.kubernetes.io/last-applied-configuration-",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let (ok, out, err) = helm(
        Some(cp),
        &[
            "upgrade",
            "trustyai-a",
            chart,
            "--namespace",
            &ns_a,
            "--set",
            "webhook.failurePolicy=Ignore",
        ],
    );
    assert!(ok, "helm upgrade adopting the CRD:\n{out}\n{err}");
    let crd = crd_api.get(CRD_NAME).await.expect("crd");
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep"),
        "the adopted CRD is the chart's: {annotations:?}"
    );
    assert!(
        !annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"),
        "{annotations:?}"
    );
    let v1 = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == "v1")
        .expect("v1");
    assert!(
        v1.additional_printer_columns.is_some(),
        "the chart's CRD (with printer columns) replaced the Go operator's"
    );
    for (name, uid) in &stored {
        let object = tas.get(name).await.expect("the TrustyAIService survived");
        assert_eq!(
            object.metadata.uid.as_ref(),
            Some(uid),
            "{name} is the same object"
        );
    }
    for (release, ns) in [("trustyai-a", &ns_a), ("trustyai-b", &ns_b)] {
        let (ok, out, err) = helm(Some(cp), &["uninstall", release, "--namespace", ns]);
        assert!(ok, "helm uninstall {release}:\n{out}\n{err}");
    }
    assert!(
        crd_api.get(CRD_NAME).await.is_ok(),
        "the adopted CRD is kept on uninstall"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The documented uninstall, end to end: the chart installed under its default release name,
/// its operator running with the chart's flags and a TrustyAIService held by its finalizer,
/// then `helm uninstall` (the operator goes with the release) and the namespace of the
/// TrustyAIService deleted. The namespace stays `Terminating` until `trustyai-operator
/// uninstall --namespace <release namespace>` (the README's command, with the chart's names as
/// its defaults) releases the TrustyAIService; afterwards nothing of ours is left but the CRD.
#[tokio::test]
async fn helm_uninstall_then_the_uninstall_command_leaves_no_namespace_terminating() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::{DeleteParams, ListParams};
    use support::operator::Operator;
    use support::wait::until;

    const RELEASE: &str = "trustyai-operator";
    let timeout = Duration::from_secs(120);
    let claim = control_planes::exclusive(Concern::HelmChart);
    let cp = claim.control_plane();
    delete_crd(cp);
    let client = cp.client().await;
    let ns = cp.namespace(&client, "release").await;
    let app = cp.namespace(&client, "app").await;
    // The registrations point at the chart's Service, which has no pod behind it here.
    install(cp, RELEASE, &ns, &["--set", "webhook.failurePolicy=Ignore"]);
    wait_established(cp);

    // There is no container runtime, so the chart's operator pod never runs: the same binary
    // runs beside the cluster in its place, with the chart's names (the release's defaults).
    let mut operator = Operator::start(
        cp,
        &ns,
        &["--proxy-cluster-role", "trustyai-operator-proxy"],
    );
    operator.wait_ready(timeout);
    let (ok, out, err) = cp.kubectl(
        &[
            "create",
            "secret",
            "generic",
            "db-creds",
            "-n",
            &app,
            "--from-literal=databaseKind=mariadb",
            "--from-literal=databaseUsername=u",
            "--from-literal=databasePassword=p",
            "--from-literal=databaseService=db",
            "--from-literal=databasePort=3306",
            "--from-literal=databaseName=trustyai",
        ],
        None,
    );
    assert!(ok, "{out}{err}");
    let services = tas_api(&client, &app, "v1");
    let tas: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
        "metadata": {"name": "tas"},
        "spec": support::samples::database("db-creds"),
    }))
    .expect("object");
    services
        .create(&PostParams::default(), &tas)
        .await
        .expect("creating the TrustyAIService");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let binding = format!("tas-{app}-proxy-rolebinding");
    until(
        "the operator's finalizer and binding",
        timeout,
        async || {
            let tas = services.get_opt("tas").await.ok()??;
            let finalized = tas.metadata.finalizers.is_some_and(|f| !f.is_empty());
            (finalized && bindings.get_opt(&binding).await.ok()?.is_some()).then_some(())
        },
    )
    .await;

    let (ok, out, err) = helm(Some(cp), &["uninstall", RELEASE, "--namespace", &ns]);
    assert!(ok, "helm uninstall failed:\n{out}\n{err}");
    operator.stop();
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .delete(&app, &DeleteParams::default())
        .await
        .expect("deleting the namespace");
    // Without an operator the finalizer holds the TrustyAIService, and it the namespace.
    until(
        "the namespace to wait on its TrustyAIService",
        timeout,
        async || {
            let namespace = namespaces.get(&app).await.ok()?;
            let terminating = namespace.status?.phase.as_deref() == Some("Terminating");
            let held = services
                .get_opt("tas")
                .await
                .ok()??
                .metadata
                .deletion_timestamp
                .is_some();
            (terminating && held).then_some(())
        },
    )
    .await;

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
        .arg("uninstall")
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .args(["--namespace", &ns])
        .output()
        .expect("running uninstall");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    until("the namespace to be gone", timeout, async || {
        namespaces.get_opt(&app).await.ok()?.is_none().then_some(())
    })
    .await;

    // Nothing of ours is left cluster-wide or in the release namespace, except the CRD.
    let ours = ListParams::default().labels("trustyai.opendatahub.io/owner-name");
    let left = bindings
        .list_metadata(&ours)
        .await
        .expect("listing bindings");
    assert!(left.items.is_empty(), "bindings left: {:?}", left.items);
    let named = |list: Vec<String>| -> Vec<String> {
        list.into_iter()
            .filter(|name| name.starts_with(RELEASE))
            .collect()
    };
    let roles = Api::<ClusterRole>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("roles");
    let role_bindings = bindings
        .list_metadata(&ListParams::default())
        .await
        .expect("bindings");
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("validating");
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .expect("mutating");
    let left: Vec<String> = named(
        roles
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .chain(
                role_bindings
                    .items
                    .into_iter()
                    .filter_map(|o| o.metadata.name),
            )
            .chain(validating.items.into_iter().filter_map(|o| o.metadata.name))
            .chain(mutating.items.into_iter().filter_map(|o| o.metadata.name))
            .collect(),
    );
    assert!(left.is_empty(), "cluster-scoped objects left: {left:?}");
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await
        .expect("secrets");
    let secrets: Vec<String> = secrets
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert!(
        named(secrets.clone()).is_empty(),
        "Secrets left: {secrets:?}"
    );
    let leases = Api::<Lease>::namespaced(client.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await
        .expect("leases");
    assert!(leases.items.is_empty(), "Leases left: {:?}", leases.items);
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt(CRD_NAME).await.expect("read").is_some(),
        "the CRD stays"
    );
    // The operator pointed the CRD's conversion at itself: the next test starts without it.
    delete_crd(cp);
}
