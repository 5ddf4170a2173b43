//! Names of the objects made for a TrustyAIService `<cr>` in namespace `<ns>`: the Go
//! operator's, so that a cluster can switch operators and keep every object.

use trustyai_crds::contract::suffix;
use trustyai_crds::v1::TrustyAIServiceSpec;

use super::non_empty;

/// The workload's name, shared by what points at it: the Deployment, the internal Service, the
/// Route and the local ServiceMonitor are all `<cr>`.
pub fn workload(cr: &str) -> String {
    cr.to_owned()
}

/// ServiceAccount of the kube-rbac-proxy sidecar: `<cr>-proxy`.
pub fn proxy_service_account(cr: &str) -> String {
    format!("{cr}{}", suffix::PROXY_SERVICE_ACCOUNT)
}

/// ClusterRoleBinding of the proxy ServiceAccount: `<cr>-<ns>-proxy-rolebinding`.
pub fn proxy_cluster_role_binding(cr: &str, namespace: &str) -> String {
    format!("{cr}-{namespace}-proxy-rolebinding")
}

/// ConfigMap with the kube-rbac-proxy configuration: `<cr>-kube-rbac-proxy-config`.
pub fn kube_rbac_proxy_config(cr: &str) -> String {
    format!("{cr}{}", suffix::KUBE_RBAC_PROXY_CONFIG)
}

/// Service in front of kube-rbac-proxy, and its serving Secret: `<cr>-tls`.
pub fn tls(cr: &str) -> String {
    format!("{cr}{}", suffix::TLS)
}

/// Serving Secret of the internal Service (also mounted into ModelMesh): `<cr>-internal`.
pub fn internal(cr: &str) -> String {
    format!("{cr}{}", suffix::INTERNAL)
}

/// PersistentVolumeClaim: `<cr>-pvc`.
pub fn pvc(cr: &str) -> String {
    format!("{cr}{}", suffix::PVC)
}

/// Secret whose presence switches the JDBC URL to TLS: `<cr>-db-ca`.
pub fn db_ca(cr: &str) -> String {
    format!("{cr}{}", suffix::DB_CA)
}

/// The database credentials Secret: `spec.storage.databaseConfigurations`, or
/// `<cr>-db-credentials` when that is unset. The Deployment uses the same name (the Go operator
/// validated the fallback but rendered an empty Secret name).
pub fn db_credentials(cr: &str, spec: &TrustyAIServiceSpec) -> String {
    non_empty(spec.storage.database_configurations.as_deref())
        .map_or_else(|| format!("{cr}{}", suffix::DB_CREDENTIALS), str::to_owned)
}

/// Istio DestinationRule for KServe InferenceServices in the mesh: `<cr>-internal`.
pub fn destination_rule(cr: &str) -> String {
    internal(cr)
}

/// Istio VirtualService redirecting port 80 to 443: `<cr>-redirect`.
pub fn virtual_service(cr: &str) -> String {
    format!("{cr}-redirect")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{database_service, with_spec};

    #[test]
    fn go_operator_names() {
        assert_eq!(workload("tas"), "tas");
        assert_eq!(proxy_service_account("tas"), "tas-proxy");
        assert_eq!(
            proxy_cluster_role_binding("tas", "models"),
            "tas-models-proxy-rolebinding"
        );
        assert_eq!(kube_rbac_proxy_config("tas"), "tas-kube-rbac-proxy-config");
        assert_eq!(tls("tas"), "tas-tls");
        assert_eq!(internal("tas"), "tas-internal");
        assert_eq!(pvc("tas"), "tas-pvc");
        assert_eq!(db_ca("tas"), "tas-db-ca");
        assert_eq!(destination_rule("tas"), "tas-internal");
        assert_eq!(virtual_service("tas"), "tas-redirect");
    }

    #[test]
    fn db_credentials_falls_back_when_unset_or_empty() {
        assert_eq!(db_credentials("tas", &database_service().spec), "db-creds");
        let unset = with_spec(serde_json::json!({
            "storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}
        }));
        assert_eq!(db_credentials("tas", &unset.spec), "tas-db-credentials");
        let empty = with_spec(serde_json::json!({
            "storage": {"format": "DATABASE", "databaseConfigurations": ""},
            "metrics": {"schedule": "5s"}
        }));
        assert_eq!(db_credentials("tas", &empty.spec), "tas-db-credentials");
    }
}
