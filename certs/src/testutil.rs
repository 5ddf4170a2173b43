//! Helpers shared by the unit tests.

use std::time::Duration;

use time::OffsetDateTime;

use crate::generate::{KeyedCert, generate_ca, issue_serving};
use crate::lifetimes::Lifetimes;
use crate::material::CaCert;
use crate::names::ServiceNames;
use crate::secret_layout::{CA_CRT, CA_KEY, SecretData, TLS_CRT, TLS_KEY, generate_data};

/// 2026-01-01T00:00:00Z: whole seconds, as X.509 times are.
pub fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_767_225_600).expect("valid timestamp")
}

pub fn days(n: u64) -> Duration {
    Duration::from_secs(n * 24 * 60 * 60)
}

pub fn names() -> ServiceNames {
    ServiceNames::new("trustyai-operator-webhook", "trustyai-operator-system")
}

pub fn lifetimes() -> Lifetimes {
    Lifetimes::default()
}

pub fn ca(now: OffsetDateTime) -> (KeyedCert, CaCert) {
    let keyed = generate_ca(&lifetimes(), now).expect("CA");
    let parsed = CaCert::parse(
        "ca",
        keyed.cert_pem.as_bytes(),
        "ca key",
        keyed.key_pem.as_bytes(),
    )
    .expect("parse CA");
    (keyed, parsed)
}

pub fn leaf(ca: &CaCert, now: OffsetDateTime) -> KeyedCert {
    issue_serving(ca, &names(), &lifetimes(), now).expect("leaf")
}

pub fn data(now: OffsetDateTime) -> SecretData {
    generate_data(&names(), &lifetimes(), now).expect("data")
}

pub fn set(data: &mut SecretData, key: &str, value: &str) {
    data.insert(key.to_owned(), value.as_bytes().to_vec());
}

pub fn text(data: &SecretData, key: &str) -> String {
    String::from_utf8(data.get(key).cloned().unwrap_or_default()).expect("utf-8")
}

pub const ALL_KEYS: [&str; 4] = [TLS_CRT, TLS_KEY, CA_CRT, CA_KEY];
