//! The two containers, `trustyai-service` and `kube-rbac-proxy`, and the pod security settings
//! of the `restricted` Pod Security Standard.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, HTTPGetAction, PodSecurityContext, Probe,
    ResourceRequirements, SeccompProfile, SecurityContext, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Name of the service container.
pub const SERVICE_CONTAINER: &str = "trustyai-service";
/// Name of the proxy container.
pub const PROXY_CONTAINER: &str = "kube-rbac-proxy";
/// Port of the service's health (and plain metrics) endpoints.
pub const SERVICE_HEALTH_PORT: i32 = 8080;
/// kube-rbac-proxy's HTTPS port.
pub const PROXY_HTTPS_PORT: i32 = 8443;
/// kube-rbac-proxy's health port.
pub const PROXY_HEALTH_PORT: i32 = 9443;

/// CPU request of the service container. The Go operator set none; a request keeps the pod out
/// of the BestEffort class (first evicted) and lets the scheduler account for it.
pub const SERVICE_CPU_REQUEST: &str = "100m";
/// Memory request of the service container. No limit: metrics over large batches spike memory,
/// and an OOM kill loses in-flight data.
pub const SERVICE_MEMORY_REQUEST: &str = "256Mi";

/// The `trustyai-service` container.
pub fn service_container(image: &str, env: Vec<EnvVar>, mounts: Vec<VolumeMount>) -> Container {
    Container {
        name: SERVICE_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        env: Some(env),
        startup_probe: Some(service_startup_probe()),
        readiness_probe: Some(service_probe("/q/health/ready")),
        liveness_probe: Some(service_probe("/q/health/live")),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(SERVICE_CPU_REQUEST, SERVICE_MEMORY_REQUEST)),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security_context()),
        volume_mounts: Some(mounts),
        // A service that exits (a database unreachable at start) writes no termination
        // message: the end of its log stands in, and the status quotes it.
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// The `kube-rbac-proxy` container: TLS on 8443 in front of the service's API on
/// `127.0.0.1:8081`, authorizing callers with the mounted `config.yaml`.
pub fn proxy_container(image: &str, mounts: Vec<VolumeMount>) -> Container {
    Container {
        name: PROXY_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        args: Some(
            [
                "--secure-listen-address=0.0.0.0:8443",
                "--upstream=http://127.0.0.1:8081/",
                "--config-file=/etc/kube-rbac-proxy/config.yaml",
                "--tls-cert-file=/etc/tls/private/tls.crt",
                "--tls-private-key-file=/etc/tls/private/tls.key",
                "--proxy-endpoints-port=9443",
                "--v=0",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        ports: Some(vec![
            container_port("https", PROXY_HTTPS_PORT),
            container_port("proxy-healthz", PROXY_HEALTH_PORT),
        ]),
        readiness_probe: Some(proxy_probe(5, 5)),
        liveness_probe: Some(proxy_probe(30, 10)),
        resources: Some(ResourceRequirements {
            limits: Some(quantities("100m", "64Mi")),
            requests: Some(quantities("50m", "32Mi")),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security_context()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// Pod-level part of the `restricted` profile: non-root and the runtime's default seccomp
/// profile. No user or group ids: OpenShift assigns them from the namespace's range and rejects
/// pods that pick their own.
pub fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}

/// Container-level part of the `restricted` profile.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        run_as_non_root: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..SecurityContext::default()
    }
}

fn service_probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::Int(SERVICE_HEALTH_PORT),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(10),
        period_seconds: Some(5),
        timeout_seconds: Some(2),
        ..Probe::default()
    }
}

/// How long the service may take to start before it is restarted: up to
/// [`SERVICE_STARTUP_SECONDS`]. Liveness and readiness are checked only once it has started, so
/// a service that starts slowly (a busy node, a large import) is not killed by its liveness
/// probe before it first listens.
fn service_startup_probe() -> Probe {
    const PERIOD: i32 = 5;
    Probe {
        period_seconds: Some(PERIOD),
        failure_threshold: Some(SERVICE_STARTUP_SECONDS / PERIOD),
        initial_delay_seconds: None,
        ..service_probe("/q/health/live")
    }
}

/// The longest start the service's startup probe allows, in seconds.
pub const SERVICE_STARTUP_SECONDS: i32 = 300;

fn proxy_probe(initial_delay: i32, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".to_owned()),
            port: IntOrString::Int(PROXY_HEALTH_PORT),
            scheme: Some("HTTPS".to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        timeout_seconds: Some(1),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: port,
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_owned(), Quantity(cpu.to_owned())),
        ("memory".to_owned(), Quantity(memory.to_owned())),
    ])
}
