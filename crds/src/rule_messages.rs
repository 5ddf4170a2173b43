//! What each rule says when it refuses a field, written once: the admission webhook's errors
//! ([`crate::validation`]) and the CRD's CEL rules ([`crate::crd`], which hold while the
//! webhook is down) use these sentences, so an author reads the same words from either.
//!
//! Each sentence follows the field's path in the error (`spec.storage.folder: Invalid value:
//! "a": must be ...`). Where the webhook knows more than a CEL rule can say (the current value
//! of a field that may not change), the sentence takes it as a parameter; CEL gets the sentence
//! without it.

use crate::contract::suffix;
use crate::patterns::SERVICE_NAME_MAX;

/// `metadata.name`: its pattern.
pub const NAME_LABEL: &str = "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit";

/// `metadata.name`: its length.
pub fn name_length() -> String {
    format!(
        "must be no more than {SERVICE_NAME_MAX} characters, because the Services <name> and <name>{} must be valid Service names",
        suffix::TLS
    )
}

/// `spec.storage.folder`.
pub const FOLDER: &str = "must be an absolute path with no '..' segment";

/// `spec.storage.size`: not a quantity.
pub const SIZE_QUANTITY: &str = "must be a quantity such as 1Gi or 500Mi";

/// `spec.storage.size`: zero or negative.
pub const SIZE_POSITIVE: &str = "must be greater than zero";

/// `spec.storage.pv` and `spec.storage.databaseConfigurations`: object names.
pub const SUBDOMAIN: &str = "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";

/// `spec.data.filename`.
pub const FILENAME: &str = "must be a plain file name (no '/', not '.' or '..', not empty)";

/// `spec.metrics.schedule`: its format.
pub const SCHEDULE: &str =
    "must be one or more <integer><unit> groups with unit ms, s, m or h, for example 5s or 1m30s";

/// `spec.storage.pv` with DATABASE storage outside migration mode.
pub const PV_MODE: &str = "may be set only with PVC storage or in migration mode (DATABASE with spec.storage.folder and spec.data.filename set)";

/// `spec.storage.format` from DATABASE to PVC.
pub const FORMAT_BACK: &str = "may not change from DATABASE back to PVC: the data is in the database, and the service would start again from the volume";

/// `spec.storage.size` below `current` (quoted), or below the current size when unknown.
pub fn size_shrink(current: Option<&str>) -> String {
    format!(
        "may not be smaller than the current {}: a PersistentVolumeClaim can grow but not shrink",
        current.unwrap_or("size")
    )
}

/// `spec.storage.pv` changed; `was` is its value (rendered), when known.
pub fn pv_changed(was: Option<&str>) -> String {
    match was {
        Some(was) => format!("may not change once set (it is {was})"),
        None => "may not change once set".to_owned(),
    }
}

/// `spec.storage.pv` removed while the claim is still mounted; `was` as in [`pv_changed`].
pub fn pv_removed(was: Option<&str>) -> String {
    let now = was.map(|was| format!(" (it is {was})")).unwrap_or_default();
    format!(
        "may not be removed while the PersistentVolumeClaim is in use{now}; it goes only with the end of a migration (DATABASE storage without storage.folder or data.filename)"
    )
}
