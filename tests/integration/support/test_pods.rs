//! The test pods of a Helm release (`helm test`), run beside the cluster. kwok simulates a node
//! but runs no container, so the harness does the kubelet's part for a pod whose image is the
//! operator's: it runs the container's command with the operator binary, with the pod's
//! environment, as the pod's ServiceAccount (a token from the TokenRequest API, bound to the
//! pod: the chart's RBAC for the test pod allows or refuses its requests, as in a cluster), and
//! writes the exit code into the pod's status, where `helm test` reads it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Pod, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use trustyai_local_cluster::ControlPlane;

use super::wait::until;

/// The operator image's entrypoint (the `Dockerfile`'s `ENTRYPOINT`).
const ENTRYPOINT: &str = "/trustyai-operator";

/// What one test pod did.
#[derive(Debug)]
pub struct PodRun {
    /// The pod's name.
    pub name: String,
    /// The command's exit code.
    pub exit_code: i32,
    /// What it printed (stdout, then stderr).
    pub output: String,
}

/// Waits for the next test hook pod in `namespace` that kwok has started (and this harness has
/// not run), checks it runs `image`, runs its command and records how it ended in its status.
pub async fn run_next(cp: &ControlPlane, client: &Client, namespace: &str, image: &str) -> PodRun {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = until(
        "a started `helm test` pod",
        Duration::from_secs(120),
        async || {
            let list = pods.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|pod| {
                let is_test = pod
                    .annotations()
                    .get("helm.sh/hook")
                    .is_some_and(|hooks| hooks.split(',').any(|h| h.trim() == "test"));
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                is_test && phase == Some("Running")
            })
        },
    )
    .await;
    let name = pod.name_any();
    let spec = pod.spec.as_ref().expect("a pod has a spec");
    let [container] = spec.containers.as_slice() else {
        panic!(
            "test pod {name}: one container expected, got {:?}",
            spec.containers
        );
    };
    assert_eq!(
        container.image.as_deref(),
        Some(image),
        "test pod {name} runs an image the harness cannot stand in for"
    );
    let env = environment(&pod, container);
    let argv = command(container, &env);
    let service_account = spec
        .service_account_name
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let kubeconfig = cp.dir.join(format!("test-pod-{name}.kubeconfig"));
    let token = token(client, namespace, &service_account, &pod).await;
    write_kubeconfig(cp, &kubeconfig, &token);

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
        .args(&argv)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(&env)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .await
        .expect("the test pod's command starts");
    let exit_code = out.status.code().unwrap_or(-1);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (phase, reason) = if exit_code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let status = json!({"status": {
        "phase": phase,
        "containerStatuses": [{
            "name": container.name, "image": image, "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                     "message": output.chars().take(4000).collect::<String>()}},
        }],
    }});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("recording the test pod's end");
    PodRun {
        name,
        exit_code,
        output,
    }
}

/// The container's environment as the kubelet sets it: plain values and the pod fields the
/// chart uses; anything else fails the test (the harness would run the command wrongly).
fn environment(pod: &Pod, container: &Container) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in container.env.iter().flatten() {
        let value = if let Some(value) = &var.value {
            value.clone()
        } else {
            let field = var
                .value_from
                .as_ref()
                .and_then(|from| from.field_ref.as_ref())
                .unwrap_or_else(|| panic!("env {}: only values and fieldRefs are run", var.name));
            match field.field_path.as_str() {
                "metadata.namespace" => pod.namespace().unwrap_or_default(),
                "metadata.name" => pod.name_any(),
                other => panic!(
                    "env {}: fieldRef {other} is not run by the harness",
                    var.name
                ),
            }
        };
        env.insert(var.name.clone(), value);
    }
    env
}

/// The arguments after the entrypoint, with `$(VAR)` expanded from `env` as the kubelet does.
fn command(container: &Container, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut argv: Vec<String> = container.command.clone().unwrap_or_default();
    if let Some(first) = argv.first() {
        assert_eq!(
            first, ENTRYPOINT,
            "the test pod must run the operator binary"
        );
        argv.remove(0);
    }
    argv.extend(container.args.clone().unwrap_or_default());
    argv.into_iter()
        .map(|arg| {
            env.iter().fold(arg, |arg, (name, value)| {
                arg.replace(&format!("$({name})"), value)
            })
        })
        .collect()
}

/// A token of `service_account`, bound to the pod (as the kubelet's projected token is).
async fn token(client: &Client, namespace: &str, service_account: &str, pod: &Pod) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(600),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                uid: pod.uid(),
            }),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for ServiceAccount {service_account}: {e}"))
        .status
        .and_then(|status| status.token)
        .expect("a token request answers with a token")
}

fn write_kubeconfig(cp: &ControlPlane, path: &std::path::Path, token: &str) {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         users:\n- name: pod\n  user:\n    token: {token}\n\
         contexts:\n- name: local\n  context:\n    cluster: local\n    user: pod\ncurrent-context: local\n",
        server = cp.server,
        ca = cp.pki.ca_cert.display(),
    );
    std::fs::write(path, text).expect("writing the test pod's kubeconfig");
}
