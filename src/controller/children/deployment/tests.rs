use k8s_openapi::api::core::v1::{Container, PodSpec, Volume};
use serde_json::json;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::labels as contract_labels;

use super::*;
use crate::controller::resources::images::{ImageSource, ResolvedImage};
use crate::controller::test_support::{
    VERSION, database_service, migration_service, pvc_instance, pvc_service, with_spec,
};

const SERVICE_IMAGE: &str = "quay.io/trustyai/trustyai-service:v1";
const PROXY_IMAGE: &str = "quay.io/opendatahub/odh-kube-rbac-proxy:v2";

fn images() -> Images {
    Images {
        service: ResolvedImage {
            image: SERVICE_IMAGE.into(),
            source: ImageSource::ConfigMap,
        },
        kube_rbac_proxy: ResolvedImage {
            image: PROXY_IMAGE.into(),
            source: ImageSource::Environment,
        },
    }
}

fn render_with(service: &TrustyAIService, version: &str, ca: bool, db_ca: bool) -> Deployment {
    let instance = Instance::new(service, version).expect("instance");
    let images = images();
    deployment(
        &instance,
        &DeploymentInputs {
            images: &images,
            custom_ca_bundle: ca,
            db_ca_exists: db_ca,
            service_access: ServiceAccess::Get,
        },
    )
    .expect("deployment")
}

fn render(service: &TrustyAIService) -> Deployment {
    render_with(service, VERSION, false, false)
}

fn pod(deployment: &Deployment) -> &PodSpec {
    deployment.spec.template.spec.as_ref().expect("pod spec")
}

fn container<'a>(deployment: &'a Deployment, name: &str) -> &'a Container {
    pod(deployment)
        .containers
        .iter()
        .find(|c| c.name == name)
        .expect("container")
}

fn volume_names(deployment: &Deployment) -> Vec<String> {
    pod(deployment)
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect()
}

/// The volumes of a Deployment that keeps its data on the PVC (PVC and migration modes).
const PVC_MODE_VOLUMES: [&str; 4] = [
    "volume",
    "tas-tls",
    "tas-internal",
    "kube-rbac-proxy-config",
];

fn volume<'a>(deployment: &'a Deployment, name: &str) -> &'a Volume {
    pod(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == name)
        .expect("volume")
}

fn env_value(container: &Container, name: &str) -> Option<String> {
    container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn mounts(container: &Container) -> Vec<(String, String)> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect()
}

fn env_names(container: &Container) -> Vec<String> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect()
}

#[test]
fn rendering_is_deterministic() {
    for service in [pvc_service(), database_service(), migration_service()] {
        let a = render_with(&service, VERSION, true, true);
        let b = render_with(&service, VERSION, true, true);
        assert_eq!(a, b);
        assert_eq!(
            serde_json::to_string(&a).expect("json"),
            serde_json::to_string(&b).expect("json")
        );
    }
}

#[test]
fn operator_upgrade_does_not_change_the_pod_template_or_selector() {
    let service = pvc_service();
    let old = render_with(&service, "1.0.0", false, false);
    let new = render_with(&service, "2.0.0", false, false);
    assert_eq!(old.spec, new.spec);
    assert_ne!(old.metadata.labels, new.metadata.labels);
}

#[test]
fn the_deployment_is_a_versioned_child_of_the_instance() {
    let d = render(&pvc_service());
    assert_eq!(d.metadata.name.as_deref(), Some("tas"));
    assert_eq!(d.metadata.namespace.as_deref(), Some("models"));
    let labels = d.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels[contract_labels::VERSION], VERSION);
    assert!(d.metadata.annotations.is_none());
    let owner = &d.metadata.owner_references.as_ref().expect("owners")[0];
    assert_eq!(owner.kind, "TrustyAIService");
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
}

/// The selector's labels of `deployment`.
fn selector(deployment: &Deployment) -> &BTreeMap<String, String> {
    let labels = &deployment.spec.selector.match_labels;
    labels.as_ref().expect("selector")
}

/// The pod template's metadata of `deployment`.
fn template_metadata(deployment: &Deployment) -> &ObjectMeta {
    let metadata = &deployment.spec.template.metadata;
    metadata.as_ref().expect("template metadata")
}

#[test]
fn the_selector_leaves_the_version_out() {
    let d = render(&pvc_service());
    let selector = selector(&d);
    assert_eq!(selector, &labels::selector("tas"));
    assert!(!selector.contains_key(contract_labels::VERSION));
}

#[test]
fn the_pods_carry_the_selectors_labels() {
    let d = render(&pvc_service());
    let template = template_metadata(&d);
    assert_eq!(template.labels.as_ref(), Some(selector(&d)));
}

#[test]
fn the_pods_are_annotated_for_prometheus_scraping() {
    let d = render(&pvc_service());
    let template = template_metadata(&d);
    let annotations = template.annotations.as_ref().expect("annotations");
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/q/metrics");
    assert_eq!(annotations["prometheus.io/scheme"], "http");
    assert_eq!(annotations.len(), 3);
}

/// The replicas of the Deployment rendered for a TrustyAIService with `spec`.
fn replicas(spec: serde_json::Value) -> Option<i32> {
    render(&with_spec(spec)).spec.replicas
}

#[test]
fn replicas_default_to_one() {
    assert_eq!(
        replicas(json!({"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}})),
        Some(1)
    );
}

#[test]
fn the_requested_replicas_are_honoured_where_the_storage_allows_them() {
    assert_eq!(
        replicas(json!({
            "replicas": 3, "storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}
        })),
        Some(3)
    );
    assert_eq!(
        replicas(json!({
            "replicas": 0, "storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}
        })),
        Some(0)
    );
}

#[test]
fn with_the_data_on_a_claim_one_gated_pod_runs() {
    let three_on_a_claim = with_spec(json!({
        "replicas": 3, "storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}
    }));
    let gates = |d: &Deployment| {
        let gates = pod(d).scheduling_gates.iter().flatten();
        gates.map(|g| g.name.clone()).collect::<Vec<_>>()
    };
    let rendered = render(&three_on_a_claim);
    assert_eq!(rendered.spec.replicas, Some(1));
    assert_eq!(gates(&rendered), [SINGLE_WRITER_GATE]);
    assert_eq!(gates(&render(&migration_service())), [SINGLE_WRITER_GATE]);
    assert!(gates(&render(&database_service())).is_empty());
    let grace = rendered
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    assert_eq!(grace, Some(TERMINATION_GRACE_SECONDS));
}

#[test]
fn strategy_never_surges() {
    let d = render(&pvc_service());
    let strategy = d.spec.strategy.expect("strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let rolling = strategy.rolling_update.expect("rolling update");
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(0)));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
}

#[test]
fn restricted_security_profile() {
    let d = render(&migration_service());
    let pod = pod(&d);
    let psc = pod.security_context.as_ref().expect("pod security context");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );
    assert!(psc.run_as_user.is_none() && psc.fs_group.is_none());
    assert_eq!(pod.containers.len(), 2);
    for c in &pod.containers {
        let sc = c.security_context.as_ref().expect("security context");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(
            sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_owned()])
        );
        assert!(
            sc.capabilities
                .as_ref()
                .and_then(|c| c.add.as_ref())
                .is_none()
        );
        assert_eq!(sc.run_as_non_root, Some(true));
        assert!(sc.privileged.is_none());
        let requests = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
    }
}

#[test]
fn service_container() {
    let d = render(&pvc_service());
    let c = container(&d, "trustyai-service");
    assert_eq!(c.image.as_deref(), Some(SERVICE_IMAGE));
    let ready = c
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .expect("probe");
    assert_eq!(ready.path.as_deref(), Some("/q/health/ready"));
    assert_eq!(ready.port, IntOrString::Int(8080));
    let live = c.liveness_probe.as_ref().expect("probe");
    assert_eq!(
        live.http_get.as_ref().and_then(|h| h.path.as_deref()),
        Some("/q/health/live")
    );
    assert_eq!(live.initial_delay_seconds, Some(10));
    assert_eq!(live.period_seconds, Some(5));
    assert_eq!(live.timeout_seconds, Some(2));
    assert_eq!(pod(&d).service_account_name.as_deref(), Some("tas-proxy"));
}

#[test]
fn a_slow_start_of_the_service_is_not_cut_short_by_its_liveness_probe() {
    let d = render(&pvc_service());
    let c = container(&d, "trustyai-service");
    let startup = c.startup_probe.as_ref().expect("a startup probe");
    assert_eq!(
        startup.http_get.as_ref().and_then(|h| h.path.as_deref()),
        Some("/q/health/live")
    );
    let allowed = startup.period_seconds.unwrap_or(10) * startup.failure_threshold.unwrap_or(3);
    assert_eq!(allowed, super::containers::SERVICE_STARTUP_SECONDS);
    assert!(allowed >= 300, "{allowed}");
}

#[test]
fn proxy_container() {
    let d = render(&pvc_service());
    let c = container(&d, "kube-rbac-proxy");
    assert_eq!(c.image.as_deref(), Some(PROXY_IMAGE));
    assert_eq!(
        c.args.as_deref().expect("args"),
        [
            "--secure-listen-address=0.0.0.0:8443",
            "--upstream=http://127.0.0.1:8081/",
            "--config-file=/etc/kube-rbac-proxy/config.yaml",
            "--tls-cert-file=/etc/tls/private/tls.crt",
            "--tls-private-key-file=/etc/tls/private/tls.key",
            "--proxy-endpoints-port=9443",
            "--v=0",
        ]
    );
    let ports: Vec<_> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert_eq!(
        ports,
        [
            ("https".to_owned(), 8443),
            ("proxy-healthz".to_owned(), 9443)
        ]
    );
    let ready = c.readiness_probe.as_ref().expect("readiness");
    let get = ready.http_get.as_ref().expect("httpGet");
    assert_eq!(get.scheme.as_deref(), Some("HTTPS"));
    assert_eq!(get.port, IntOrString::Int(9443));
    assert_eq!(get.path.as_deref(), Some("/healthz"));
    assert_eq!(ready.initial_delay_seconds, Some(5));
    let live = c.liveness_probe.as_ref().expect("liveness");
    assert_eq!(live.initial_delay_seconds, Some(30));
    assert_eq!(live.period_seconds, Some(10));
    let resources = c.resources.as_ref().expect("resources");
    let q =
        |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         k: &str| { m.as_ref().expect("quantities")[k].0.clone() };
    assert_eq!(q(&resources.requests, "cpu"), "50m");
    assert_eq!(q(&resources.requests, "memory"), "32Mi");
    assert_eq!(q(&resources.limits, "cpu"), "100m");
    assert_eq!(q(&resources.limits, "memory"), "64Mi");
}

#[test]
fn pvc_mode_has_the_claim_among_its_volumes() {
    let d = render(&pvc_service());
    assert_eq!(volume_names(&d), PVC_MODE_VOLUMES);
    let claim = volume(&d, "volume")
        .persistent_volume_claim
        .as_ref()
        .expect("pvc volume");
    assert_eq!(claim.claim_name, "tas-pvc");
}

#[test]
fn pvc_mode_mounts_the_claim_in_the_service_at_inputs() {
    let d = render(&pvc_service());
    assert_eq!(
        mounts(container(&d, "trustyai-service")),
        [
            ("tas-internal".to_owned(), "/etc/tls/internal".to_owned()),
            ("volume".to_owned(), "/inputs".to_owned())
        ]
    );
}

#[test]
fn pvc_mode_configures_the_service_for_file_storage() {
    let d = render(&pvc_service());
    assert_eq!(
        env_names(container(&d, "trustyai-service")),
        [
            "SERVICE_STORAGE_FORMAT",
            "STORAGE_DATA_FILENAME",
            "STORAGE_DATA_FOLDER",
            "SERVICE_DATA_FORMAT",
            "QUARKUS_HIBERNATE_ORM_ACTIVE",
            "SERVICE_METRICS_SCHEDULE",
            "SERVICE_BATCH_SIZE"
        ]
    );
}

#[test]
fn the_proxy_mounts_its_certificate_with_its_config() {
    let d = render(&pvc_service());
    assert_eq!(
        mounts(container(&d, "kube-rbac-proxy")),
        [
            ("tas-tls".to_owned(), "/etc/tls/private".to_owned()),
            (
                "kube-rbac-proxy-config".to_owned(),
                "/etc/kube-rbac-proxy".to_owned()
            )
        ]
    );
}

#[test]
fn pvc_mode_ignores_the_db_ca() {
    assert_eq!(
        render_with(&pvc_service(), VERSION, false, true),
        render_with(&pvc_service(), VERSION, false, false)
    );
}

/// The Deployment of a database-mode TrustyAIService that names no credentials Secret.
fn database_only() -> Deployment {
    render(&with_spec(json!({
        "storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}
    })))
}

#[test]
fn database_mode_has_no_claim_volume() {
    let d = database_only();
    assert_eq!(
        volume_names(&d),
        ["tas-tls", "tas-internal", "kube-rbac-proxy-config"]
    );
    assert_eq!(
        mounts(container(&d, "trustyai-service")),
        [("tas-internal".to_owned(), "/etc/tls/internal".to_owned())]
    );
}

#[test]
fn database_mode_reads_the_fallback_credentials_secret() {
    let d = database_only();
    let refs: Vec<_> = container(&d, "trustyai-service")
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(refs.len(), 7);
    assert!(refs.iter().all(|n| n == "tas-db-credentials"));
}

#[test]
fn database_mode_with_db_ca_mounts_it() {
    let d = render_with(&database_service(), VERSION, false, true);
    assert_eq!(
        volume_names(&d),
        [
            "tas-tls",
            "tas-internal",
            "kube-rbac-proxy-config",
            "db-ca-cert"
        ]
    );
    let db_ca = volume(&d, "db-ca-cert")
        .secret
        .as_ref()
        .expect("secret volume");
    assert_eq!(db_ca.secret_name.as_deref(), Some("tas-db-ca"));
    let c = container(&d, "trustyai-service");
    assert!(mounts(c).contains(&("db-ca-cert".to_owned(), "/etc/tls/db".to_owned())));
    let url = env_value(c, "QUARKUS_DATASOURCE_JDBC_URL").expect("url");
    assert!(url.ends_with("?requireSSL=true&sslMode=verify-ca&serverSslCert=/etc/tls/db/ca.crt"));
}

#[test]
fn migration_mode_keeps_the_claim_mounted() {
    let d = render(&migration_service());
    assert_eq!(volume_names(&d), PVC_MODE_VOLUMES);
    let c = container(&d, "trustyai-service");
    assert!(mounts(c).contains(&("volume".to_owned(), "/inputs".to_owned())));
}

#[test]
fn migration_mode_configures_a_move_from_the_folder_into_the_database() {
    let d = render(&migration_service());
    let names = env_names(container(&d, "trustyai-service"));
    assert_eq!(
        names.iter().filter(|n| *n == "SERVICE_DATA_FORMAT").count(),
        1
    );
    assert!(names.contains(&"STORAGE_MIGRATION_CONFIG_FROM_FOLDER".to_owned()));
    assert!(names.contains(&"QUARKUS_DATASOURCE_PASSWORD".to_owned()));
}

#[test]
fn custom_ca_bundle_goes_to_the_proxy_only() {
    let d = render_with(&pvc_service(), VERSION, true, false);
    assert_eq!(
        volume_names(&d),
        [
            "volume",
            "odh-trusted-ca-bundle",
            "tas-tls",
            "tas-internal",
            "kube-rbac-proxy-config"
        ]
    );
    let proxy = container(&d, "kube-rbac-proxy");
    let bundle = proxy
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "odh-trusted-ca-bundle")
        .expect("bundle mount");
    assert_eq!(bundle.mount_path, "/etc/ssl/certs/ca-bundle.crt");
    assert_eq!(bundle.sub_path.as_deref(), Some("ca-bundle.crt"));
    assert!(
        !mounts(container(&d, "trustyai-service"))
            .iter()
            .any(|(n, _)| n == "odh-trusted-ca-bundle")
    );
}

#[test]
fn image_change_changes_the_template() {
    let instance = pvc_instance();
    let mut other = images();
    other.service.image = "quay.io/trustyai/trustyai-service:v2".into();
    let a = deployment(
        &instance,
        &DeploymentInputs {
            images: &images(),
            custom_ca_bundle: false,
            db_ca_exists: false,
            service_access: ServiceAccess::Get,
        },
    )
    .expect("a");
    let b = deployment(
        &instance,
        &DeploymentInputs {
            images: &other,
            custom_ca_bundle: false,
            db_ca_exists: false,
            service_access: ServiceAccess::Get,
        },
    )
    .expect("b");
    assert_ne!(a.spec.template, b.spec.template);
}

#[test]
fn unknown_format_is_an_error() {
    let service = with_spec(json!({"storage": {"format": "S3"}, "metrics": {"schedule": "5s"}}));
    let instance = Instance::new(&service, VERSION).expect("instance");
    let images = images();
    assert_eq!(
        deployment(
            &instance,
            &DeploymentInputs {
                images: &images,
                custom_ca_bundle: false,
                db_ca_exists: false,
                service_access: ServiceAccess::Get,
            }
        ),
        Err(BuildError::UnknownStorageFormat("S3".into()))
    );
}

#[test]
fn only_a_non_default_service_access_is_named_in_the_pod_template() {
    let annotations = |access| {
        let instance = pvc_instance();
        let images = images();
        let inputs = DeploymentInputs {
            images: &images,
            custom_ca_bundle: false,
            db_ca_exists: false,
            service_access: access,
        };
        let rendered = deployment(&instance, &inputs).expect("deployment");
        rendered
            .spec
            .template
            .metadata
            .and_then(|m| m.annotations)
            .unwrap_or_default()
    };
    assert!(!annotations(ServiceAccess::Get).contains_key(SERVICE_ACCESS_ANNOTATION));
    assert_eq!(
        annotations(ServiceAccess::HttpMethod)[SERVICE_ACCESS_ANNOTATION],
        "http-method"
    );
}
