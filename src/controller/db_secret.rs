//! The database credentials Secret check (DATABASE and migration modes): the Secret must exist
//! and hold the six mandatory keys, each non-empty. The failure's
//! [`reason`](DbSecretError::reason) is the Go operator's `DBAvailable` condition reason.
//!
//! `databaseGeneration` is not checked (the Go operator did not either); the Deployment's
//! reference to it is optional.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use trustyai_crds::contract::{db_secret, reason};

/// Why the credentials Secret is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbSecretError {
    /// The Secret does not exist.
    #[error("database credentials secret {secret} not found in namespace {namespace}")]
    NotFound {
        /// The Secret's name.
        secret: String,
        /// Its namespace.
        namespace: String,
    },
    /// A mandatory key is absent.
    #[error("mandatory key {key} is missing from database configuration secret {secret}")]
    MissingKey {
        /// The Secret's name.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// A mandatory key is present with an empty value.
    #[error("mandatory key {key} is empty in database configuration secret {secret}")]
    EmptyKey {
        /// The Secret's name.
        secret: String,
        /// The key.
        key: &'static str,
    },
}

impl DbSecretError {
    /// The `DBAvailable=False` reason: `DBCredentialsNotFound` or `DBCredentialsError`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => reason::DB_CREDENTIALS_NOT_FOUND,
            Self::MissingKey { .. } | Self::EmptyKey { .. } => reason::DB_CREDENTIALS_ERROR,
        }
    }
}

/// Checks the `data` of the Secret `secret` in `namespace`; `None` means the Secret does not
/// exist. Reports the first problem, in the order of [`db_secret::MANDATORY`].
pub fn check(
    secret: &str,
    namespace: &str,
    data: Option<&BTreeMap<String, ByteString>>,
) -> Result<(), DbSecretError> {
    let Some(data) = data else {
        return Err(DbSecretError::NotFound {
            secret: secret.to_owned(),
            namespace: namespace.to_owned(),
        });
    };
    for key in db_secret::MANDATORY {
        match data.get(key) {
            None => {
                return Err(DbSecretError::MissingKey {
                    secret: secret.to_owned(),
                    key,
                });
            }
            Some(value) if value.0.is_empty() => {
                return Err(DbSecretError::EmptyKey {
                    secret: secret.to_owned(),
                    key,
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// [`check`] on a Secret object as read from the API server (`None` when it was not found).
pub fn check_secret(
    secret_name: &str,
    namespace: &str,
    secret: Option<&Secret>,
) -> Result<(), DbSecretError> {
    let empty = BTreeMap::new();
    check(
        secret_name,
        namespace,
        secret.map(|s| s.data.as_ref().unwrap_or(&empty)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    fn complete() -> BTreeMap<String, ByteString> {
        data(&[
            ("databaseKind", "mariadb"),
            ("databaseUsername", "u"),
            ("databasePassword", "p"),
            ("databaseService", "mariadb"),
            ("databasePort", "3306"),
            ("databaseName", "trustyai"),
        ])
    }

    #[test]
    fn complete_secret_is_valid() {
        assert_eq!(check("db", "ns", Some(&complete())), Ok(()));
    }

    #[test]
    fn missing_secret() {
        let err = check("db", "ns", None).expect_err("not found");
        assert_eq!(err.reason(), "DBCredentialsNotFound");
        assert_eq!(
            err.to_string(),
            "database credentials secret db not found in namespace ns"
        );
    }

    #[test]
    fn each_missing_or_empty_key_is_named() {
        for key in db_secret::MANDATORY {
            let mut without = complete();
            without.remove(key);
            let err = check("db", "ns", Some(&without)).expect_err("missing");
            assert_eq!(err.reason(), "DBCredentialsError");
            assert_eq!(
                err.to_string(),
                format!("mandatory key {key} is missing from database configuration secret db")
            );

            let mut empty = complete();
            empty.insert(key.to_owned(), ByteString(Vec::new()));
            let err = check("db", "ns", Some(&empty)).expect_err("empty");
            assert_eq!(err.reason(), "DBCredentialsError");
            assert!(err.to_string().contains(key));
            assert!(err.to_string().contains("is empty"));
        }
    }

    #[test]
    fn secret_object_without_data() {
        let secret = Secret::default();
        assert_eq!(
            check_secret("db", "ns", Some(&secret)),
            Err(DbSecretError::MissingKey {
                secret: "db".into(),
                key: "databaseKind"
            })
        );
        assert!(matches!(
            check_secret("db", "ns", None),
            Err(DbSecretError::NotFound { .. })
        ));
    }
}
