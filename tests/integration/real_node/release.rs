//! The operator's release on the real node, installed once per control plane as an admin
//! installs it: the chart with the images built here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::Mutex;
use trustyai_local_cluster::ControlPlane;
use trustyai_local_cluster::images::{self, Image, kube_rbac_proxy::Flavour};

use crate::support::cluster::{minimal_spec, tas, tas_api};
use crate::support::control_planes::{self, Claim, Concern};
use crate::support::helm::{helm, helm_chart};
use crate::support::wait;

pub const TIMEOUT: Duration = Duration::from_secs(180);
pub const RELEASE: &str = "trustyai";
pub const NAMESPACE: &str = "trustyai-system";
pub const SELECTOR: &str = "app.kubernetes.io/name=trustyai-operator";
/// `helm test`'s pod.
pub const TEST_POD: &str = "trustyai-trustyai-operator-test";

/// The control plane the release every test of this module looks at is installed on, by the
/// first test on it (the concern's control plane is started anew after another concern ran).
static INSTALLED: Mutex<Option<&'static ControlPlane>> = Mutex::const_new(None);

/// Says the release is gone from `cp` (a test uninstalled it): the next test installs it again.
pub async fn forget_release() {
    *INSTALLED.lock().await = None;
}

/// The images the release runs, built here: the operator's, and the TrustyAI service's and
/// OpenDataHub's kube-rbac-proxy, which the operator's ConfigMap names for TrustyAIServices.
pub struct Images {
    pub operator: Image,
    pub service: Image,
    pub proxy: Image,
}

/// The release's images, built once per test process before any control plane is claimed (a
/// cold build takes minutes, during which the node would be held).
pub async fn images() -> &'static Images {
    static IMAGES: tokio::sync::OnceCell<Images> = tokio::sync::OnceCell::const_new();
    IMAGES.get_or_init(build_images).await
}

/// Builds the release's images, side by side (each is cached by its inputs).
async fn build_images() -> Images {
    let build = |f: fn() -> Result<Image, String>, what: &'static str| {
        tokio::task::spawn_blocking(move || f().unwrap_or_else(|e| panic!("{what}: {e}")))
    };
    let operator = build(images::operator::build, "the operator's image");
    let service = build(
        images::trustyai_service::build,
        "the TrustyAI service's image",
    );
    let proxy = build(
        || images::kube_rbac_proxy::build(Flavour::OpenDataHub),
        "OpenDataHub's kube-rbac-proxy image",
    );
    let (operator, service, proxy) = tokio::join!(operator, service, proxy);
    Images {
        operator: operator.expect("the build thread"),
        service: service.expect("the build thread"),
        proxy: proxy.expect("the build thread"),
    }
}

/// The control plane with the chart installed (2 replicas of the operator's image; the
/// TrustyAI service's and kube-rbac-proxy's images in its ConfigMap), taken shared, or
/// exclusively by a test that disturbs the release.
pub async fn installed(exclusive: bool) -> (Claim, &'static ControlPlane) {
    let images = images().await;
    let claim = if exclusive {
        control_planes::exclusive(Concern::RealNode)
    } else {
        control_planes::shared(Concern::RealNode)
    };
    let cp = claim.control_plane();
    let mut installed = INSTALLED.lock().await;
    if !installed.is_some_and(|on| std::ptr::eq(on, cp)) {
        for image in [&images.operator, &images.service, &images.proxy] {
            cp.import_image(image).expect("imported");
        }
        let image = &images.operator;
        let repository = format!("image.repository={}", image.repository());
        let tag = format!("image.tag={}", image.tag());
        let (ok, out, err) = helm_chart(
            Some(cp),
            "install",
            RELEASE,
            &[
                "--namespace",
                NAMESPACE,
                "--create-namespace",
                "--set",
                &repository,
                "--set",
                &tag,
                "--set",
                "image.pullPolicy=Never",
                "--set",
                "replicaCount=2",
                "--set",
                &format!("service.serviceImage={}", images.service.reference),
                "--set",
                &format!("service.kubeRbacProxyImage={}", images.proxy.reference),
            ],
        );
        assert!(ok, "helm install: {out}{err}");
        *installed = Some(cp);
    }
    drop(installed);
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    two_ready(cp, &pods, None).await;
    // Ready pods are in the Service's endpoints a moment before kube-proxy's rules route to
    // them: a dry run through v1alpha1 (conversion and both admission webhooks) says when.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let probe = tas("v1alpha1", "through-the-service", minimal_spec());
    let api = tas_api(&client, "default", "v1alpha1");
    wait_for(
        cp,
        "the webhooks answering through their Service",
        async || api.create(&dry_run, &probe).await.ok().map(|_| ()),
    )
    .await;
    (claim, cp)
}

/// [`installed`], with a client and a new namespace `prefix-…` of the test's own.
pub async fn installed_namespace(exclusive: bool, prefix: &str) -> control_planes::Start {
    let (claim, cp) = installed(exclusive).await;
    let client = cp.client().await;
    let ns = cp.namespace(&client, prefix).await;
    (claim, cp, client, ns)
}

/// What a failed wait prints here: the control plane's logs, then the end of the operator
/// pods' logs (the operator runs in them, so no process of the test holds its log).
pub fn logs(cp: &ControlPlane) -> String {
    let mut out = cp.logs();
    let (_, text, err) = cp.kubectl(
        &[
            "logs",
            "--namespace",
            NAMESPACE,
            "--selector",
            SELECTOR,
            "--tail",
            "60",
            "--all-containers",
            "--prefix",
        ],
        None,
    );
    out.push_str("--- the operator's pods (kubectl logs --tail 60) ---\n");
    out.push_str(&text);
    out.push_str(&err);
    out
}

/// Polls `check` until it returns `Some`, for at most [`TIMEOUT`]; panics with `what` and
/// [`logs`] when it runs out. Every wait of this module goes through it, so each fails the same
/// way: with what the control plane and the operator's pods said.
pub async fn wait_for<T>(
    cp: &ControlPlane,
    what: &str,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    wait::until_showing(what, TIMEOUT, || logs(cp), check).await
}

/// Deletes every TrustyAIService outside `keep` (the objects of tests that have finished: call
/// it only under an exclusive claim) and waits until they are gone, so that a change to the
/// whole release (its service image) rolls only the pods of the test that makes it.
pub async fn remove_other_trustyai_services(cp: &ControlPlane, keep: &str) {
    let client = cp.client().await;
    let all: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("trustyai.opendatahub.io", "v1", "TrustyAIService"),
            "trustyaiservices",
        ),
    );
    let others = async || -> Option<Vec<(String, String)>> {
        let list = all.list(&ListParams::default()).await.ok()?;
        Some(
            list.items
                .into_iter()
                .filter_map(|o| Some((o.metadata.namespace?, o.metadata.name?)))
                .filter(|(ns, _)| ns != keep)
                .collect(),
        )
    };
    for (ns, name) in others().await.unwrap_or_default() {
        let _ = tas_api(&client, &ns, "v1")
            .delete(&name, &Default::default())
            .await;
    }
    wait_for(cp, "the other tests' TrustyAIServices gone", async || {
        others().await.filter(Vec::is_empty).map(drop)
    })
    .await;
}

/// A pod of the operator's Deployment (not `helm test`'s pod, which has its labels too).
fn of_the_deployment(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == "ReplicaSet"))
}

/// The Deployment's pods.
pub async fn operator_pods(pods: &Api<Pod>) -> Option<Vec<Pod>> {
    let list = pods
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .ok()?;
    Some(list.items.into_iter().filter(of_the_deployment).collect())
}

/// Waits until two of the Deployment's pods are Ready, none of them named `not`.
pub async fn two_ready(cp: &ControlPlane, pods: &Api<Pod>, not: Option<&str>) -> Vec<Pod> {
    wait_for(cp, "2 operator pods Ready", async || {
        let ready: Vec<Pod> = operator_pods(pods)
            .await?
            .into_iter()
            .filter(is_ready)
            .collect();
        let fresh = ready.iter().all(|p| p.metadata.name.as_deref() != not);
        (ready.len() == 2 && fresh).then_some(ready)
    })
    .await
}

/// A Ready pod of the operator's Deployment.
pub fn is_ready(pod: &Pod) -> bool {
    of_the_deployment(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The process of `pod`'s container `container` on the node, found through containerd.
pub fn container_process(cp: &ControlPlane, pod: &Pod, container: &str) -> u32 {
    let id = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container))
        .and_then(|c| c.container_id.clone())
        .unwrap_or_else(|| panic!("no container id for {container}"));
    let id = id.strip_prefix("containerd://").expect("a containerd id");
    cp.container_pid(id).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm upgrade` of the release with `values` added.
pub async fn upgrade(cp: &'static ControlPlane, values: Vec<String>) {
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let mut args = vec!["--namespace", NAMESPACE, "--reuse-values"];
        for value in &values {
            args.extend(["--set", value.as_str()]);
        }
        helm_chart(Some(cp), "upgrade", RELEASE, &args)
    })
    .await
    .expect("helm ran");
    assert!(ok, "helm upgrade: {out}{err}");
}

/// `helm uninstall` of the release; the next test installs it again.
pub async fn uninstall(cp: &'static ControlPlane) {
    forget_release().await;
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        helm(
            Some(cp),
            &["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"],
        )
    })
    .await
    .expect("helm ran");
    assert!(ok, "helm uninstall: {out}{err}");
}
