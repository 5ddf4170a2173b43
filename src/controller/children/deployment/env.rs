//! The `trustyai-service` container's environment: the Go operator's contract with the service
//! image, per storage mode.
//!
//! | Mode | Variables, in this order |
//! |---|---|
//! | all | `SERVICE_STORAGE_FORMAT` first; `SERVICE_METRICS_SCHEDULE`, `SERVICE_BATCH_SIZE` after the mode's block |
//! | PVC | `STORAGE_DATA_FILENAME`, `STORAGE_DATA_FOLDER`, `SERVICE_DATA_FORMAT=<data.format>`, `QUARKUS_HIBERNATE_ORM_ACTIVE=false` |
//! | DATABASE | `QUARKUS_HIBERNATE_ORM_ACTIVE=true`, the credentials (secretKeyRef), `QUARKUS_DATASOURCE_JDBC_MAX_SIZE=16`, `QUARKUS_DATASOURCE_JDBC_URL`, `SERVICE_DATA_FORMAT=HIBERNATE`, `QUARKUS_DATASOURCE_GENERATION` |
//! | migration | `DATABASE_ATTEMPT_MIGRATION=true`, `STORAGE_DATA_FILENAME`, `STORAGE_DATA_FOLDER`, then the DATABASE block, then `STORAGE_MIGRATION_CONFIG_FROM_FOLDER`, `STORAGE_MIGRATION_CONFIG_FROM_FILENAME` at the end |
//!
//! Differences from the Go operator, all deliberate:
//! - Migration mode sets `SERVICE_DATA_FORMAT` once, to `HIBERNATE`. The Go template emitted
//!   `<data.format>` and then `HIBERNATE`; Kubernetes keeps the last duplicate, so pods always
//!   ran with `HIBERNATE`, which is right: after migration the service's store is the database,
//!   and the CSV source is described by `STORAGE_MIGRATION_CONFIG_FROM_*`. A duplicate name
//!   also makes server-side apply fail (env is a map keyed by name).
//! - Migration mode sets `DATABASE_ATTEMPT_MIGRATION=true`: without it the service skips the
//!   migration (the Go operator's open fix, trustyai-service-operator PR #934).
//! - The secretKeyRefs name the credentials Secret the status check validated, including the
//!   `<cr>-db-credentials` fallback (the Go template rendered an empty name).
//! - `databaseGeneration` is optional in the Secret (not among the validated keys), so its
//!   secretKeyRef is `optional: true`; the Go operator's pods failed to start without it.

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
use trustyai_crds::contract::db_secret;
use trustyai_crds::defaults::{
    DEFAULT_BATCH_SIZE, DEFAULT_DATA_FILENAME, DEFAULT_DATA_FORMAT, DEFAULT_FOLDER, StorageMode,
};
use trustyai_crds::v1::TrustyAIServiceSpec;

use crate::controller::resources::non_empty;

/// `PVC` or `DATABASE`: `spec.storage.format`.
pub const SERVICE_STORAGE_FORMAT: &str = "SERVICE_STORAGE_FORMAT";
/// `spec.metrics.schedule`.
pub const SERVICE_METRICS_SCHEDULE: &str = "SERVICE_METRICS_SCHEDULE";
/// `spec.metrics.batchSize` (default 5000).
pub const SERVICE_BATCH_SIZE: &str = "SERVICE_BATCH_SIZE";
/// The data file name on the PVC.
pub const STORAGE_DATA_FILENAME: &str = "STORAGE_DATA_FILENAME";
/// The PVC mount path.
pub const STORAGE_DATA_FOLDER: &str = "STORAGE_DATA_FOLDER";
/// `<data.format>` with a PVC, `HIBERNATE` with a database.
pub const SERVICE_DATA_FORMAT: &str = "SERVICE_DATA_FORMAT";
/// Whether the service uses the database.
pub const QUARKUS_HIBERNATE_ORM_ACTIVE: &str = "QUARKUS_HIBERNATE_ORM_ACTIVE";
/// Asks the service to move the PVC data into the database.
pub const DATABASE_ATTEMPT_MIGRATION: &str = "DATABASE_ATTEMPT_MIGRATION";
/// Folder the data is migrated from.
pub const STORAGE_MIGRATION_CONFIG_FROM_FOLDER: &str = "STORAGE_MIGRATION_CONFIG_FROM_FOLDER";
/// File the data is migrated from.
pub const STORAGE_MIGRATION_CONFIG_FROM_FILENAME: &str = "STORAGE_MIGRATION_CONFIG_FROM_FILENAME";
/// Database kind (`databaseKind`).
pub const QUARKUS_DATASOURCE_DB_KIND: &str = "QUARKUS_DATASOURCE_DB_KIND";
/// Connection pool size.
pub const QUARKUS_DATASOURCE_JDBC_MAX_SIZE: &str = "QUARKUS_DATASOURCE_JDBC_MAX_SIZE";
/// Database user (`databaseUsername`).
pub const QUARKUS_DATASOURCE_USERNAME: &str = "QUARKUS_DATASOURCE_USERNAME";
/// Database password (`databasePassword`).
pub const QUARKUS_DATASOURCE_PASSWORD: &str = "QUARKUS_DATASOURCE_PASSWORD";
/// Database host (`databaseService`).
pub const DATABASE_SERVICE: &str = "DATABASE_SERVICE";
/// Database port (`databasePort`).
pub const DATABASE_PORT: &str = "DATABASE_PORT";
/// Database name (`databaseName`).
pub const DATABASE_NAME: &str = "DATABASE_NAME";
/// The JDBC URL, built by the service from the variables above.
pub const QUARKUS_DATASOURCE_JDBC_URL: &str = "QUARKUS_DATASOURCE_JDBC_URL";
/// Schema generation strategy (`databaseGeneration`).
pub const QUARKUS_DATASOURCE_GENERATION: &str = "QUARKUS_DATASOURCE_GENERATION";

/// `SERVICE_DATA_FORMAT` with a database.
pub const HIBERNATE: &str = "HIBERNATE";
/// `QUARKUS_DATASOURCE_JDBC_MAX_SIZE`.
pub const JDBC_MAX_SIZE: &str = "16";
/// The JDBC URL; `${…}` are expanded by Quarkus from the variables above, not by Kubernetes.
pub const JDBC_URL: &str =
    "jdbc:${QUARKUS_DATASOURCE_DB_KIND}://${DATABASE_SERVICE}:${DATABASE_PORT}/${DATABASE_NAME}";
/// Appended to [`JDBC_URL`] when the `<cr>-db-ca` Secret exists (MariaDB-style TLS).
pub const JDBC_TLS_PARAMETERS: &str =
    "?requireSSL=true&sslMode=verify-ca&serverSslCert=/etc/tls/db/ca.crt";

/// The environment of the `trustyai-service` container. `db_credentials` is the credentials
/// Secret's name; `db_tls` says whether the `<cr>-db-ca` Secret exists.
pub fn service_env(
    spec: &TrustyAIServiceSpec,
    mode: StorageMode,
    db_credentials: &str,
    db_tls: bool,
) -> Vec<EnvVar> {
    let folder = non_empty(spec.storage.folder.as_deref()).unwrap_or(DEFAULT_FOLDER);
    let data = spec.data.as_ref();
    let filename =
        non_empty(data.and_then(|d| d.filename.as_deref())).unwrap_or(DEFAULT_DATA_FILENAME);
    let data_format =
        non_empty(data.and_then(|d| d.format.as_deref())).unwrap_or(DEFAULT_DATA_FORMAT);

    let mut env = vec![value(SERVICE_STORAGE_FORMAT, &spec.storage.format)];
    match mode {
        StorageMode::Pvc => env.extend([
            value(STORAGE_DATA_FILENAME, filename),
            value(STORAGE_DATA_FOLDER, folder),
            value(SERVICE_DATA_FORMAT, data_format),
            value(QUARKUS_HIBERNATE_ORM_ACTIVE, "false"),
        ]),
        StorageMode::Migration => {
            env.extend([
                value(DATABASE_ATTEMPT_MIGRATION, "true"),
                value(STORAGE_DATA_FILENAME, filename),
                value(STORAGE_DATA_FOLDER, folder),
            ]);
            env.extend(database_env(db_credentials, db_tls));
        }
        StorageMode::Database => env.extend(database_env(db_credentials, db_tls)),
    }
    env.push(value(SERVICE_METRICS_SCHEDULE, &spec.metrics.schedule));
    env.push(value(
        SERVICE_BATCH_SIZE,
        &spec
            .metrics
            .batch_size
            .unwrap_or(DEFAULT_BATCH_SIZE)
            .to_string(),
    ));
    if mode == StorageMode::Migration {
        env.extend([
            value(STORAGE_MIGRATION_CONFIG_FROM_FOLDER, folder),
            value(STORAGE_MIGRATION_CONFIG_FROM_FILENAME, filename),
        ]);
    }
    env
}

fn database_env(secret: &str, tls: bool) -> Vec<EnvVar> {
    let url = if tls {
        format!("{JDBC_URL}{JDBC_TLS_PARAMETERS}")
    } else {
        JDBC_URL.to_owned()
    };
    vec![
        value(QUARKUS_HIBERNATE_ORM_ACTIVE, "true"),
        from_secret(QUARKUS_DATASOURCE_DB_KIND, secret, db_secret::KIND, false),
        value(QUARKUS_DATASOURCE_JDBC_MAX_SIZE, JDBC_MAX_SIZE),
        from_secret(
            QUARKUS_DATASOURCE_USERNAME,
            secret,
            db_secret::USERNAME,
            false,
        ),
        from_secret(
            QUARKUS_DATASOURCE_PASSWORD,
            secret,
            db_secret::PASSWORD,
            false,
        ),
        from_secret(DATABASE_SERVICE, secret, db_secret::SERVICE, false),
        from_secret(DATABASE_PORT, secret, db_secret::PORT, false),
        from_secret(DATABASE_NAME, secret, db_secret::NAME, false),
        value(QUARKUS_DATASOURCE_JDBC_URL, &url),
        value(SERVICE_DATA_FORMAT, HIBERNATE),
        from_secret(
            QUARKUS_DATASOURCE_GENERATION,
            secret,
            db_secret::GENERATION,
            true,
        ),
    ]
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn from_secret(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{
        database_service, migration_service, pvc_service, with_spec,
    };
    use std::collections::BTreeSet;

    /// `(name, value)` for plain values, `(name, "secret:<secret>/<key>[?]")` for references.
    fn flat(env: &[EnvVar]) -> Vec<(String, String)> {
        env.iter()
            .map(|e| {
                let v = match (&e.value, &e.value_from) {
                    (Some(v), None) => v.clone(),
                    (None, Some(from)) => {
                        let r = from.secret_key_ref.as_ref().expect("secretKeyRef");
                        let optional = if r.optional == Some(true) { "?" } else { "" };
                        format!("secret:{}/{}{optional}", r.name, r.key)
                    }
                    other => panic!("unexpected env source {other:?}"),
                };
                (e.name.clone(), v)
            })
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn database_block(secret: &str, url: &str) -> Vec<(String, String)> {
        pairs(&[
            ("QUARKUS_HIBERNATE_ORM_ACTIVE", "true"),
            (
                "QUARKUS_DATASOURCE_DB_KIND",
                &format!("secret:{secret}/databaseKind"),
            ),
            ("QUARKUS_DATASOURCE_JDBC_MAX_SIZE", "16"),
            (
                "QUARKUS_DATASOURCE_USERNAME",
                &format!("secret:{secret}/databaseUsername"),
            ),
            (
                "QUARKUS_DATASOURCE_PASSWORD",
                &format!("secret:{secret}/databasePassword"),
            ),
            (
                "DATABASE_SERVICE",
                &format!("secret:{secret}/databaseService"),
            ),
            ("DATABASE_PORT", &format!("secret:{secret}/databasePort")),
            ("DATABASE_NAME", &format!("secret:{secret}/databaseName")),
            ("QUARKUS_DATASOURCE_JDBC_URL", url),
            ("SERVICE_DATA_FORMAT", "HIBERNATE"),
            (
                "QUARKUS_DATASOURCE_GENERATION",
                &format!("secret:{secret}/databaseGeneration?"),
            ),
        ])
    }

    #[test]
    fn pvc_mode() {
        let spec = pvc_service().spec;
        assert_eq!(
            flat(&service_env(&spec, StorageMode::Pvc, "unused", true)),
            pairs(&[
                ("SERVICE_STORAGE_FORMAT", "PVC"),
                ("STORAGE_DATA_FILENAME", "data.csv"),
                ("STORAGE_DATA_FOLDER", "/inputs"),
                ("SERVICE_DATA_FORMAT", "CSV"),
                ("QUARKUS_HIBERNATE_ORM_ACTIVE", "false"),
                ("SERVICE_METRICS_SCHEDULE", "5s"),
                ("SERVICE_BATCH_SIZE", "5000"),
            ])
        );
    }

    #[test]
    fn pvc_mode_defaults_when_fields_are_absent() {
        let spec = with_spec(serde_json::json!({
            "storage": {"format": "PVC", "folder": ""},
            "data": {"format": "CSV"},
            "metrics": {"schedule": "1m"}
        }))
        .spec;
        let env = flat(&service_env(&spec, StorageMode::Pvc, "unused", false));
        assert!(env.contains(&("STORAGE_DATA_FILENAME".into(), "data.csv".into())));
        assert!(env.contains(&("STORAGE_DATA_FOLDER".into(), "/inputs".into())));
        assert!(env.contains(&("SERVICE_BATCH_SIZE".into(), "5000".into())));
        assert!(env.contains(&("SERVICE_METRICS_SCHEDULE".into(), "1m".into())));
    }

    #[test]
    fn database_mode() {
        let spec = database_service().spec;
        let mut expected = pairs(&[("SERVICE_STORAGE_FORMAT", "DATABASE")]);
        expected.extend(database_block("db-creds", JDBC_URL));
        expected.extend(pairs(&[
            ("SERVICE_METRICS_SCHEDULE", "5s"),
            ("SERVICE_BATCH_SIZE", "5000"),
        ]));
        assert_eq!(
            flat(&service_env(
                &spec,
                StorageMode::Database,
                "db-creds",
                false
            )),
            expected
        );
    }

    #[test]
    fn database_mode_with_db_ca_uses_tls() {
        let spec = database_service().spec;
        let env = flat(&service_env(&spec, StorageMode::Database, "db-creds", true));
        let url = &env
            .iter()
            .find(|(k, _)| k == "QUARKUS_DATASOURCE_JDBC_URL")
            .expect("url")
            .1;
        assert_eq!(
            url,
            "jdbc:${QUARKUS_DATASOURCE_DB_KIND}://${DATABASE_SERVICE}:${DATABASE_PORT}/${DATABASE_NAME}?requireSSL=true&sslMode=verify-ca&serverSslCert=/etc/tls/db/ca.crt"
        );
    }

    #[test]
    fn migration_mode_has_one_data_format() {
        let spec = migration_service().spec;
        let mut expected = pairs(&[
            ("SERVICE_STORAGE_FORMAT", "DATABASE"),
            ("DATABASE_ATTEMPT_MIGRATION", "true"),
            ("STORAGE_DATA_FILENAME", "data.csv"),
            ("STORAGE_DATA_FOLDER", "/inputs"),
        ]);
        expected.extend(database_block("db-creds", JDBC_URL));
        expected.extend(pairs(&[
            ("SERVICE_METRICS_SCHEDULE", "10s"),
            ("SERVICE_BATCH_SIZE", "100"),
            ("STORAGE_MIGRATION_CONFIG_FROM_FOLDER", "/inputs"),
            ("STORAGE_MIGRATION_CONFIG_FROM_FILENAME", "data.csv"),
        ]));
        let env = flat(&service_env(
            &spec,
            StorageMode::Migration,
            "db-creds",
            false,
        ));
        assert_eq!(env, expected);
    }

    #[test]
    fn names_are_unique_in_every_mode() {
        for (spec, mode) in [
            (pvc_service().spec, StorageMode::Pvc),
            (database_service().spec, StorageMode::Database),
            (migration_service().spec, StorageMode::Migration),
        ] {
            let env = service_env(&spec, mode, "s", true);
            let names: BTreeSet<_> = env.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(names.len(), env.len(), "{mode:?}");
        }
    }
}
