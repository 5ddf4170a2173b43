//! Database mode: readiness, credential problems, and the migration that needs both the PVC and
//! the database.

use trustyai_crds::defaults::StorageMode;

use super::*;
use crate::controller::db_secret::DbSecretError;

#[test]
fn database_mode_ready() {
    let status = first_status(&database_ready());
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_condition(&status, "DBAvailable", "True", "DBAvailable");
    assert!(condition(&status, "PVCAvailable").is_none());
}

#[test]
fn database_credentials_problems() {
    let cases = [
        (
            DbSecretError::NotFound {
                secret: "db".into(),
                namespace: "models".into(),
            },
            "DBCredentialsNotFound",
        ),
        (
            DbSecretError::MissingKey {
                secret: "db".into(),
                key: "databasePassword",
            },
            "DBCredentialsError",
        ),
        (
            DbSecretError::EmptyKey {
                secret: "db".into(),
                key: "databasePort",
            },
            "DBCredentialsError",
        ),
    ];
    for (error, reason) in cases {
        let observed = Observations {
            db_credentials: Some(Err(error.clone())),
            deployment: None,
            ..database_ready()
        };
        let status = first_status(&observed);
        assert_eq!(status.phase.as_deref(), Some("Not Ready"));
        assert_condition(&status, "DBAvailable", "False", reason);
        assert_eq!(
            condition(&status, "DBAvailable").and_then(|c| c.message.clone()),
            Some(error.to_string())
        );
    }
}

#[test]
fn database_mode_is_not_always_a_connection_error() {
    let starting = Observations {
        deployment: Some(starting_deployment()),
        ..database_ready()
    };
    let status = first_status(&starting);
    assert_condition(&status, "DBAvailable", "Unknown", "ProvisioningInProgress");

    let failing = Observations {
        deployment: Some(DeploymentObservation {
            failing: true,
            ..starting_deployment()
        }),
        ..database_ready()
    };
    let status = first_status(&failing);
    assert_condition(&status, "DBAvailable", "False", "DBConnectionError");

    let unchecked = Observations {
        db_credentials: None,
        ..database_ready()
    };
    let status = first_status(&unchecked);
    assert_eq!(status.phase.as_deref(), Some("Not Ready"));
    assert_eq!(sr(&status, "DBAvailable").0, "Unknown");
}

#[test]
fn migration_is_ready_only_with_both_its_stores() {
    let migration = Observations {
        mode: StorageMode::Migration,
        pvc: Some(PvcObservation::Bound),
        ..database_ready()
    };
    let status = first_status(&migration);
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_condition(&status, "PVCAvailable", "True", "PVCFound");
    assert_condition(&status, "DBAvailable", "True", "DBAvailable");

    let no_pvc = Observations {
        pvc: Some(PvcObservation::Missing),
        ..migration.clone()
    };
    assert_eq!(
        compute(None, &no_pvc, &at(100)).phase.as_deref(),
        Some("Not Ready")
    );
    let bad_db = Observations {
        db_credentials: Some(Err(DbSecretError::NotFound {
            secret: "db".into(),
            namespace: "models".into(),
        })),
        ..migration
    };
    assert_eq!(
        compute(None, &bad_db, &at(100)).phase.as_deref(),
        Some("Not Ready")
    );
}
