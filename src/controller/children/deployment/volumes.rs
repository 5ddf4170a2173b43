//! The pod's volumes and each container's mounts.
//!
//! | Volume | Source | Mounted in | When |
//! |---|---|---|---|
//! | `volume` | PVC `<cr>-pvc` | service at `<storage.folder>` | PVC and migration modes |
//! | `odh-trusted-ca-bundle` | ConfigMap `odh-trusted-ca-bundle` | proxy at `/etc/ssl/certs/ca-bundle.crt` | the ConfigMap exists |
//! | `<cr>-tls` | Secret `<cr>-tls` | proxy at `/etc/tls/private` | always |
//! | `<cr>-internal` | Secret `<cr>-internal` | service at `/etc/tls/internal` | always |
//! | `kube-rbac-proxy-config` | ConfigMap `<cr>-kube-rbac-proxy-config` | proxy at `/etc/kube-rbac-proxy` | always |
//! | `db-ca-cert` | Secret `<cr>-db-ca` | service at `/etc/tls/db` | DATABASE and migration modes, when the Secret exists |
//!
//! The database CA is ignored in PVC mode (the Go operator mounted it there too, uselessly), so
//! creating that Secret does not restart a PVC-mode service.

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, PersistentVolumeClaimVolumeSource, SecretVolumeSource, Volume,
    VolumeMount,
};
use trustyai_crds::contract::custom_ca_bundle;
use trustyai_crds::defaults::{DEFAULT_FOLDER, StorageMode};

use crate::controller::resources::{Instance, names, non_empty};

/// Name of the PVC volume (the Go operator's).
pub const PVC_VOLUME: &str = "volume";
/// Name of the kube-rbac-proxy configuration volume.
pub const PROXY_CONFIG_VOLUME: &str = "kube-rbac-proxy-config";
/// Name of the database CA volume.
pub const DB_CA_VOLUME: &str = "db-ca-cert";
/// Where the internal serving certificate is mounted in the service container.
pub const INTERNAL_TLS_PATH: &str = "/etc/tls/internal";
/// Where the `<cr>-tls` certificate is mounted in the proxy container.
pub const PROXY_TLS_PATH: &str = "/etc/tls/private";
/// Where the proxy configuration is mounted.
pub const PROXY_CONFIG_PATH: &str = "/etc/kube-rbac-proxy";
/// Where the database CA is mounted.
pub const DB_CA_PATH: &str = "/etc/tls/db";
/// Where the custom CA bundle file is mounted in the proxy container.
pub const CA_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-bundle.crt";

/// `0644`, written out so the rendered object equals what the API server stores.
const DEFAULT_MODE: i32 = 420;

/// What decides the optional volumes.
#[derive(Debug, Clone, Copy)]
pub struct VolumePlan {
    /// PVC or migration mode.
    pub pvc: bool,
    /// The custom CA bundle ConfigMap exists.
    pub custom_ca_bundle: bool,
    /// DATABASE or migration mode and the `<cr>-db-ca` Secret exists.
    pub db_tls: bool,
}

impl VolumePlan {
    /// The plan for `mode` with the observed optional objects.
    pub fn new(mode: StorageMode, custom_ca_bundle: bool, db_ca_exists: bool) -> Self {
        Self {
            pvc: mode.uses_pvc(),
            custom_ca_bundle,
            db_tls: mode.uses_database() && db_ca_exists,
        }
    }
}

/// The pod's volumes, in the Go operator's order.
pub fn volumes(instance: &Instance<'_>, plan: VolumePlan) -> Vec<Volume> {
    let cr = instance.name();
    let mut out = Vec::new();
    if plan.pvc {
        out.push(Volume {
            name: PVC_VOLUME.to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: names::pvc(cr),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    if plan.custom_ca_bundle {
        out.push(config_map_volume(
            custom_ca_bundle::CONFIG_MAP,
            custom_ca_bundle::CONFIG_MAP,
        ));
    }
    out.push(secret_volume(&names::tls(cr), &names::tls(cr)));
    out.push(secret_volume(&names::internal(cr), &names::internal(cr)));
    out.push(config_map_volume(
        PROXY_CONFIG_VOLUME,
        &names::kube_rbac_proxy_config(cr),
    ));
    if plan.db_tls {
        out.push(secret_volume(DB_CA_VOLUME, &names::db_ca(cr)));
    }
    out
}

/// Mounts of the `trustyai-service` container.
pub fn service_mounts(instance: &Instance<'_>, plan: VolumePlan) -> Vec<VolumeMount> {
    let mut out = vec![mount(&names::internal(instance.name()), INTERNAL_TLS_PATH)];
    if plan.pvc {
        let folder = non_empty(instance.spec().storage.folder.as_deref()).unwrap_or(DEFAULT_FOLDER);
        out.push(VolumeMount {
            read_only: Some(false),
            ..mount(PVC_VOLUME, folder)
        });
    }
    if plan.db_tls {
        out.push(mount(DB_CA_VOLUME, DB_CA_PATH));
    }
    out
}

/// Mounts of the `kube-rbac-proxy` container.
pub fn proxy_mounts(instance: &Instance<'_>, plan: VolumePlan) -> Vec<VolumeMount> {
    let mut out = vec![
        mount(&names::tls(instance.name()), PROXY_TLS_PATH),
        mount(PROXY_CONFIG_VOLUME, PROXY_CONFIG_PATH),
    ];
    if plan.custom_ca_bundle {
        out.push(VolumeMount {
            sub_path: Some(custom_ca_bundle::KEY.to_owned()),
            ..mount(custom_ca_bundle::CONFIG_MAP, CA_BUNDLE_PATH)
        });
    }
    out
}

/// A read-only mount.
fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

fn secret_volume(name: &str, secret: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            default_mode: Some(DEFAULT_MODE),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn config_map_volume(name: &str, config_map: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_owned(),
            default_mode: Some(DEFAULT_MODE),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn db_ca_only_with_a_database() {
        assert!(!VolumePlan::new(StorageMode::Pvc, false, true).db_tls);
        assert!(VolumePlan::new(StorageMode::Database, false, true).db_tls);
        assert!(VolumePlan::new(StorageMode::Migration, false, true).db_tls);
        assert!(!VolumePlan::new(StorageMode::Database, false, false).db_tls);
        assert!(!VolumePlan::new(StorageMode::Database, false, true).pvc);
    }

    #[test]
    fn every_mount_has_a_volume() {
        let instance = pvc_instance();
        for plan in [
            VolumePlan {
                pvc: true,
                custom_ca_bundle: true,
                db_tls: true,
            },
            VolumePlan {
                pvc: false,
                custom_ca_bundle: false,
                db_tls: false,
            },
        ] {
            let volumes: Vec<_> = volumes(&instance, plan)
                .into_iter()
                .map(|v| v.name)
                .collect();
            for m in service_mounts(&instance, plan)
                .into_iter()
                .chain(proxy_mounts(&instance, plan))
            {
                assert!(volumes.contains(&m.name), "{} has no volume", m.name);
            }
        }
    }
}
