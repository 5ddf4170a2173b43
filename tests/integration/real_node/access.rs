//! Who may use a TrustyAI service's API: kube-rbac-proxy in front of the real service checks
//! the caller's token (a real TokenReview) and its right on `services/<cr>` (a real
//! SubjectAccessReview) with the configuration the operator renders.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use trustyai_local_cluster::ControlPlane;
use trustyai_local_cluster::images::{self, kube_rbac_proxy::Flavour};

use super::release::{
    NAMESPACE, installed, installed_namespace, is_ready, uninstall, upgrade, wait_for,
};
use super::service::{pvc_service, service_ready};
use super::service_api::{ServiceApi, assert_spd, caller, spd_body, upload_body};

const SPD: &str = "/metrics/group/fairness/spd";
const UPLOAD: &str = "/data/upload";

/// The status of `answer`, or the error as a panic.
fn status(answer: Result<(u16, serde_json::Value), String>) -> u16 {
    answer.unwrap_or_else(|e| panic!("no answer: {e}")).0
}

/// Waits until the TrustyAIService `demo` in `ns` has pods, all Ready and all `what` says
/// (`is`).
async fn only_ready_demo_pods(
    cp: &ControlPlane,
    client: &kube::Client,
    ns: &str,
    what: &str,
    is: impl Fn(&Pod) -> bool,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_for(cp, &format!("only Ready demo pods {what}"), async || {
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=demo"))
            .await
            .ok()?;
        let ready = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        };
        (!list.items.is_empty() && list.items.iter().all(|p| is(p) && ready(p))).then_some(())
    })
    .await;
}

/// Through `demo-tls` in `ns`: a token with `get` on the Service reads but may not upload; one
/// with `create` too uploads.
async fn reading_needs_get_and_uploading_create(client: &kube::Client, ns: &str) {
    let reader = caller(client, ns, "reader", &["get"], "demo").await;
    let writer = caller(client, ns, "writer", &["get", "create"], "demo").await;
    let api = ServiceApi::of(client, ns, "demo").await;
    api.wait_reachable(&writer).await;
    let upload = upload_body();
    let answer = api.call(&reader, "POST", UPLOAD, Some(&upload)).await;
    assert_eq!(status(answer), 403, "an upload with get only");
    let answer = api.call(&writer, "POST", UPLOAD, Some(&upload)).await;
    assert_eq!(status(answer), 200, "an upload with create");
    let answer = api.call(&reader, "GET", "/info", None).await;
    assert_eq!(status(answer), 200, "a read with get");
}

#[tokio::test]
async fn access_is_granted_by_get_on_this_very_service() {
    let (_claim, cp, client, ns) = installed_namespace(false, "access").await;
    pvc_service(cp, &client, &ns, "demo").await;
    // `get` on this Service only: the Role's resourceNames hold because the name is checked.
    let reader = caller(&client, &ns, "reader", &["get"], "demo").await;
    // `get` on another Service of the namespace.
    let stranger = caller(&client, &ns, "stranger", &["get"], "other").await;
    let api = ServiceApi::of(&client, &ns, "demo").await;
    api.wait_reachable(&reader).await;

    let (code, body) = api
        .call(&reader, "POST", UPLOAD, Some(&upload_body()))
        .await
        .unwrap_or_else(|e| panic!("no answer: {e}"));
    assert_eq!(code, 200, "{body}");
    assert!(body.to_string().contains("20 datapoints"), "{body}");
    let answer = api.call(&reader, "POST", SPD, Some(&spd_body())).await;
    assert_spd(&answer.unwrap_or_else(|e| panic!("no answer: {e}")));

    for (method, path) in [("GET", "/info"), ("POST", UPLOAD)] {
        let body = (method == "POST").then(upload_body);
        let answer = api.call(&stranger, method, path, body.as_ref()).await;
        assert_eq!(status(answer), 403, "{method} {path} of a stranger");
    }
    let answer = api.call("not-a-token", "GET", "/info", None).await;
    assert_eq!(status(answer), 401, "an invalid token");
}

#[tokio::test]
async fn with_http_method_access_each_call_needs_the_verb_of_its_method() {
    let (_claim, cp) = installed(true).await;
    upgrade(cp, vec!["service.access=http-method".into()]).await;
    let client = cp.client().await;
    // Every operator pod started with the setting: no old pod renders the default any more.
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(
        cp,
        "only operator pods with --service-access=http-method",
        async || {
            let pods = super::release::operator_pods(&operator_pods).await?;
            let with_it = |p: &Pod| {
                p.spec.as_ref().is_some_and(|s| {
                    s.containers.iter().any(|c| {
                        c.args
                            .iter()
                            .flatten()
                            .any(|a| a == "--service-access=http-method")
                    })
                })
            };
            (pods.len() == 2 && pods.iter().all(|p| with_it(p) && is_ready(p))).then_some(())
        },
    )
    .await;
    let ns = cp.namespace(&client, "access-by-method").await;
    pvc_service(cp, &client, &ns, "demo").await;
    // The pods that serve were started with the configuration without a verb.
    only_ready_demo_pods(cp, &client, &ns, "started with http-method access", |p| {
        p.metadata.annotations.as_ref().is_some_and(|a| {
            a.get("trustyai.opendatahub.io/service-access")
                .is_some_and(|v| v == "http-method")
        })
    })
    .await;
    service_ready(cp, &client, &ns, "demo").await;

    reading_needs_get_and_uploading_create(&client, &ns).await;
    uninstall(cp).await;
}

#[tokio::test]
async fn with_upstream_kube_rbac_proxy_the_verbs_follow_the_http_method() {
    let upstream = tokio::task::spawn_blocking(|| {
        images::kube_rbac_proxy::build(Flavour::Upstream)
            .unwrap_or_else(|e| panic!("upstream kube-rbac-proxy's image: {e}"))
    })
    .await
    .expect("the build thread");
    let (_claim, cp) = installed(true).await;
    cp.import_image(&upstream).expect("imported");
    upgrade(
        cp,
        vec![format!("service.kubeRbacProxyImage={}", upstream.reference)],
    )
    .await;
    let client = cp.client().await;
    let ns = cp.namespace(&client, "access-upstream").await;
    pvc_service(cp, &client, &ns, "demo").await;
    // Only pods running upstream's proxy serve.
    only_ready_demo_pods(cp, &client, &ns, "running upstream kube-rbac-proxy", |p| {
        p.spec.as_ref().is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| c.image.as_deref() == Some(upstream.reference.as_str()))
        })
    })
    .await;
    service_ready(cp, &client, &ns, "demo").await;

    // The rendered `verb: get` is not read.
    reading_needs_get_and_uploading_create(&client, &ns).await;
    uninstall(cp).await;
}
