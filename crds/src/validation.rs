//! Validation of TrustyAIService v1 objects, as a pure function: the validating admission
//! webhook calls [`validate`] (after defaulting) and turns the [`Verdict`] into its response;
//! the offline CLI prints it.
//!
//! The rules extend the CRD's CEL rules with the same patterns ([`crate::patterns`]) and add
//! what CEL can't say: allowed image prefixes, the schedule's minimum, transitions that need
//! the old object's defaults, and warnings.
//!
//! Objects stored before a rule existed (for example by the Go operator, which validated
//! nothing) must stay updatable and deletable. So on UPDATE only the fields that change are
//! held to the rules (ratcheting), an update that leaves `spec` alone is always allowed, and an
//! object being deleted is never refused.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::contract::{GROUP, KIND, db_secret, retention, storage_format, suffix};
use crate::defaults::{self, Operation, StorageMode, storage_mode};
use crate::patterns;
use crate::quantity::Quantity;
use crate::rule_messages as says;

/// Compiles one of the crate's constant patterns.
#[allow(clippy::expect_used)] // the patterns are constants and a unit test compiles each one
fn pattern(re: &str) -> Regex {
    Regex::new(re).expect("constant pattern compiles")
}

static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| pattern(patterns::DNS1035_LABEL));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| pattern(patterns::DNS1123_SUBDOMAIN));
static DOT_DOT_SEGMENT: LazyLock<Regex> = LazyLock::new(|| pattern(patterns::DOT_DOT_SEGMENT));
static SCHEDULE: LazyLock<Regex> = LazyLock::new(|| pattern(patterns::SCHEDULE));
/// One `<integer><unit>` group of a schedule that matched [`SCHEDULE`].
static SCHEDULE_GROUP: LazyLock<Regex> = LazyLock::new(|| pattern(r"([0-9]+)(ms|s|m|h)"));
static IMAGE_REFERENCE: LazyLock<Regex> = LazyLock::new(|| pattern(patterns::IMAGE_REFERENCE));
/// A generateName prefix: the API server appends five random characters to it.
static GENERATE_NAME_PREFIX: LazyLock<Regex> = LazyLock::new(|| pattern(r"^[a-z][-a-z0-9]*$"));

/// Characters the API server appends to a `metadata.generateName` prefix.
const GENERATED_SUFFIX_LEN: usize = 5;

use crate::limits::{
    BATCH_SIZE_MIN, DATA_FORMAT_MAX, FILENAME_MAX, FOLDER_MAX, IMAGE_MAX, REPLICAS_MIN,
    SCHEDULE_MAX, SIZE_MAX,
};

// Field paths, as JSON keys from the root.
type Path = &'static [&'static str];
const SPEC: Path = &["spec"];
const STORAGE: Path = &["spec", "storage"];
const FORMAT: Path = &["spec", "storage", "format"];
const FOLDER: Path = &["spec", "storage", "folder"];
const SIZE: Path = &["spec", "storage", "size"];
const DB_CONFIG: Path = &["spec", "storage", "databaseConfigurations"];
const PV: Path = &["spec", "storage", "pv"];
const RETENTION: Path = &["spec", "storage", "retention"];
const DATA: Path = &["spec", "data"];
const FILENAME: Path = &["spec", "data", "filename"];
const DATA_FORMAT: Path = &["spec", "data", "format"];
const METRICS: Path = &["spec", "metrics"];
const SCHEDULE_PATH: Path = &["spec", "metrics", "schedule"];
const BATCH_SIZE: Path = &["spec", "metrics", "batchSize"];
const REPLICAS: Path = &["spec", "replicas"];
const IMAGE: Path = &["spec", "image"];
/// The fields that decide the storage mode.
const MODE_FIELDS: [Path; 3] = [FORMAT, FOLDER, FILENAME];

/// Everything the rules need besides the objects.
#[derive(Default)]
pub struct ValidationContext<'a> {
    /// Prefixes `spec.image` must start with (the operator ConfigMap's `allowedImagePrefixes`).
    /// Empty means no custom image is allowed. A prefix that does not end in `/`, `:` or `@`
    /// matches only up to such a boundary, so `quay.io` does not allow `quay.io.evil.com/x`.
    pub allowed_image_prefixes: Vec<String>,
    /// Whether a Secret of this name exists in the object's namespace. Only used for a warning;
    /// `None` skips the check.
    pub secret_exists: Option<&'a dyn Fn(&str) -> bool>,
}

impl fmt::Debug for ValidationContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidationContext")
            .field("allowed_image_prefixes", &self.allowed_image_prefixes)
            .field("secret_exists", &self.secret_exists.map(|_| "<lookup>"))
            .finish()
    }
}

/// The outcome of validation: the object is allowed when `errors` is empty; `warnings` are
/// shown to the user either way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Every violated rule, all at once.
    pub errors: Vec<FieldError>,
    /// Allowed but probably unintended settings, each starting with the field path.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// No rule is violated.
    pub fn is_allowed(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The kind of a field error, as in Kubernetes' `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A required field is missing.
    Required,
    /// The value breaks a rule.
    Invalid,
    /// The value has the wrong JSON type.
    TypeInvalid,
    /// The value is not one of a fixed set.
    NotSupported,
    /// The field may not be set (or changed) here.
    Forbidden,
    /// The value is longer than allowed.
    TooLong,
}

impl ErrorKind {
    /// The `causes[].reason` the API server uses for this kind (`metav1.CauseType`).
    pub fn cause_type(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
        }
    }

    /// Kinds whose message leaves out the value, as the API server does.
    fn omits_value(self) -> bool {
        matches!(self, Self::Required | Self::Forbidden | Self::TooLong)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
        })
    }
}

/// Declares [`Rule`] and `Rule::ALL` together, so the list cannot miss a rule.
macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident),+ $(,)?) => {
        /// The rule an error comes from: a stable label for metrics ("admission denials by
        /// rule").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[$doc])* $variant),+
        }

        impl Rule {
            /// Every rule, for example to initialize metric series.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant),+];
        }
    };
}

rules! {
    /// `spec`, `spec.storage`, `spec.metrics` present; objects and scalars of the right type.
    Structure,
    /// `metadata.name` (or `generateName`) makes valid Service names (CREATE only).
    Name,
    /// `spec.storage.format` is `PVC` or `DATABASE`.
    StorageFormat,
    /// `spec.storage.folder` is an absolute path without `..`.
    StorageFolder,
    /// `spec.storage.size` is a quantity greater than zero.
    StorageSize,
    /// `spec.storage.pv` is a DNS-1123 subdomain.
    StoragePv,
    /// `spec.storage.pv` only with PVC storage or in migration mode.
    StoragePvMode,
    /// `spec.storage.databaseConfigurations` is a DNS-1123 subdomain.
    DatabaseConfigurations,
    /// `spec.storage.retention` is `Retain` or `Delete`.
    StorageRetention,
    /// `spec.data.filename` is a plain file name.
    DataFilename,
    /// `spec.data.format` is `CSV` when a PVC is used.
    DataFormat,
    /// `spec.metrics.schedule` is present, well-formed and at least one second.
    MetricsSchedule,
    /// `spec.metrics.batchSize` is at least 1.
    MetricsBatchSize,
    /// `spec.replicas` is not negative.
    Replicas,
    /// `spec.image` is a well-formed reference under an allowed prefix.
    Image,
    /// UPDATE: no DATABASE → PVC; PVC → DATABASE only as a migration.
    StorageFormatChange,
    /// UPDATE: `spec.storage.size` does not shrink.
    StorageSizeShrink,
    /// UPDATE: `spec.storage.pv` does not change once set; it is removed only with the end of a
    /// migration, when no PVC is mounted any more.
    StoragePvImmutable,
    /// UPDATE: `spec.storage.folder` does not change while a PVC is in use.
    StorageFolderImmutable,
}

impl Rule {
    /// The stable snake_case identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Structure => "structure",
            Self::Name => "name",
            Self::StorageFormat => "storage_format",
            Self::StorageFolder => "storage_folder",
            Self::StorageSize => "storage_size",
            Self::StoragePv => "storage_pv",
            Self::StoragePvMode => "storage_pv_mode",
            Self::DatabaseConfigurations => "database_configurations",
            Self::StorageRetention => "storage_retention",
            Self::DataFilename => "data_filename",
            Self::DataFormat => "data_format",
            Self::MetricsSchedule => "metrics_schedule",
            Self::MetricsBatchSize => "metrics_batch_size",
            Self::Replicas => "replicas",
            Self::Image => "image",
            Self::StorageFormatChange => "storage_format_change",
            Self::StorageSizeShrink => "storage_size_shrink",
            Self::StoragePvImmutable => "storage_pv_immutable",
            Self::StorageFolderImmutable => "storage_folder_immutable",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `object` (a whole TrustyAIService) keeps its data on a PersistentVolumeClaim: PVC
/// storage, or a migration from one.
fn uses_pvc(object: &Value) -> bool {
    object
        .get("spec")
        .and_then(storage_mode)
        .is_some_and(StorageMode::uses_pvc)
}

/// One violation, displayed like the API server's field errors:
/// `spec.storage.size: Invalid value: "1Gx": must be a quantity such as 1Gi or 500Mi`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted field path, for example `spec.storage.size`.
    pub field: String,
    /// What is wrong.
    pub kind: ErrorKind,
    /// The offending value, when there is one.
    pub value: Option<Value>,
    /// Explanation; may be empty.
    pub detail: String,
    /// The rule that failed.
    pub rule: Rule,
}

impl FieldError {
    fn new(
        rule: Rule,
        field: impl Into<String>,
        kind: ErrorKind,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            kind,
            value,
            detail: detail.into(),
            rule,
        }
    }

    /// A required field is missing.
    pub fn required(rule: Rule, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(rule, field, ErrorKind::Required, None, detail)
    }

    /// `value` breaks the rule `detail` states.
    pub fn invalid(
        rule: Rule,
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(rule, field, ErrorKind::Invalid, Some(value.into()), detail)
    }

    /// `value` has the wrong JSON type; `detail` says which is expected.
    pub fn type_invalid(
        rule: Rule,
        field: impl Into<String>,
        value: Value,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(rule, field, ErrorKind::TypeInvalid, Some(value), detail)
    }

    /// `value` is not one of `supported`.
    pub fn not_supported(
        rule: Rule,
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self::new(
            rule,
            field,
            ErrorKind::NotSupported,
            Some(value.into()),
            format!("supported values: {}", list.join(", ")),
        )
    }

    /// The field may not be set, or changed, in this situation.
    pub fn forbidden(rule: Rule, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(rule, field, ErrorKind::Forbidden, None, detail)
    }

    /// `value` is longer than `max` bytes.
    pub fn too_long(
        rule: Rule,
        field: impl Into<String>,
        value: impl Into<Value>,
        max: usize,
    ) -> Self {
        Self::new(
            rule,
            field,
            ErrorKind::TooLong,
            Some(value.into()),
            format!("may not be more than {max} bytes"),
        )
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind)?;
        if !self.kind.omits_value()
            && let Some(value) = &self.value
        {
            write!(f, ": {}", render_value(value))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// The message of a denial, in the API server's words:
/// `TrustyAIService.trustyai.opendatahub.io "x" is invalid: [err1, err2]` (one error goes
/// without brackets).
pub fn denial_message(name: &str, errors: &[FieldError]) -> String {
    denial_message_of(KIND, name, errors)
}

/// [`denial_message`] for an object of `kind` (in this API group), whatever its error type.
pub fn denial_message_of(kind: &str, name: &str, errors: &[impl fmt::Display]) -> String {
    let head = format!("{kind}.{GROUP} {} is invalid", go_quote(name));
    match errors {
        [] => head,
        [one] => format!("{head}: {one}"),
        many => {
            let all: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("{head}: [{}]", all.join(", "))
        }
    }
}

/// Checks a v1 TrustyAIService (already defaulted) against every rule. `old` is the stored
/// object on UPDATE and `None` on CREATE.
pub fn validate(new: &Value, old: Option<&Value>, ctx: &ValidationContext<'_>) -> Verdict {
    if is_being_deleted(new) {
        // Only finalizer removal is left to do; nothing may stand in its way.
        return Verdict::default();
    }
    let old = old.map(OldObject::new);
    if let Some(old) = &old
        && old.spec_unchanged(new)
    {
        // Metadata-only changes (labels, annotations, finalizers) never re-validate the spec.
        return Verdict::default();
    }
    let mut validator = Validator {
        new,
        old: old.as_ref(),
        ctx,
        verdict: Verdict::default(),
    };
    validator.run();
    validator.verdict
}

/// The stored object, also as defaulting would leave it: a field the webhook is about to add
/// (or the controller assumes) on an object stored without defaults is not a change.
struct OldObject<'a> {
    raw: &'a Value,
    defaulted: Value,
}

impl<'a> OldObject<'a> {
    fn new(raw: &'a Value) -> Self {
        Self {
            raw,
            defaulted: defaults::defaulted(raw, Operation::Update),
        }
    }

    fn spec_unchanged(&self, new: &Value) -> bool {
        let spec = new.get("spec");
        spec == self.raw.get("spec") || spec == self.defaulted.get("spec")
    }
}

struct Validator<'a> {
    new: &'a Value,
    old: Option<&'a OldObject<'a>>,
    ctx: &'a ValidationContext<'a>,
    verdict: Verdict,
}

impl<'a> Validator<'a> {
    fn run(&mut self) {
        if self.old.is_none() {
            self.name();
        }
        if !self.structure() {
            return;
        }
        self.storage();
        self.data();
        self.metrics();
        self.replicas();
        self.image();
        if let Some(old) = self.old {
            self.transitions(old);
        }
        self.warnings();
    }

    fn error(&mut self, error: FieldError) {
        self.verdict.errors.push(error);
    }

    fn warn(&mut self, warning: String) {
        self.verdict.warnings.push(warning);
    }

    /// Ratcheting: on CREATE everything counts as changed; on UPDATE a field is held to the
    /// rules only if it differs from the stored value (with or without its default).
    fn changed(&self, path: &[&str]) -> bool {
        let Some(old) = self.old else {
            return true;
        };
        let new = at(self.new, path);
        new != at(old.raw, path) && new != at(&old.defaulted, path)
    }

    fn changed_any(&self, paths: &[Path]) -> bool {
        paths.iter().any(|path| self.changed(path))
    }

    fn str_at(&self, path: Path) -> Option<&'a str> {
        at(self.new, path).and_then(Value::as_str)
    }

    fn mode(&self) -> Option<StorageMode> {
        self.new.get("spec").and_then(storage_mode)
    }

    // --- metadata -------------------------------------------------------------------------

    fn name(&mut self) {
        match self.new.pointer("/metadata/name") {
            Some(Value::String(name)) => self.check_name(name),
            None | Some(Value::Null) => match self.new.pointer("/metadata/generateName") {
                Some(Value::String(prefix)) => self.check_generate_name(prefix),
                _ => self.error(FieldError::required(
                    Rule::Name,
                    "metadata.name",
                    "name or generateName is required",
                )),
            },
            Some(other) => self.error(FieldError::type_invalid(
                Rule::Name,
                "metadata.name",
                other.clone(),
                "must be a string",
            )),
        }
    }

    fn check_name(&mut self, name: &str) {
        if name.len() > patterns::SERVICE_NAME_MAX {
            self.error(FieldError::invalid(
                Rule::Name,
                "metadata.name",
                name,
                says::name_length(),
            ));
        }
        if !DNS1035_LABEL.is_match(name) {
            self.error(FieldError::invalid(
                Rule::Name,
                "metadata.name",
                name,
                says::NAME_LABEL,
            ));
        }
    }

    fn check_generate_name(&mut self, prefix: &str) {
        let max = patterns::SERVICE_NAME_MAX - GENERATED_SUFFIX_LEN;
        if prefix.len() > max {
            self.error(FieldError::invalid(
                Rule::Name,
                "metadata.generateName",
                prefix,
                format!(
                    "must be no more than {max} characters, so that the generated name stays within {} characters",
                    patterns::SERVICE_NAME_MAX
                ),
            ));
        }
        if !GENERATE_NAME_PREFIX.is_match(prefix) {
            self.error(FieldError::invalid(
                Rule::Name,
                "metadata.generateName",
                prefix,
                "must start with a lowercase letter and contain only lowercase letters, digits and '-'",
            ));
        }
    }

    // --- shape ----------------------------------------------------------------------------

    /// Reports missing required objects and wrong JSON types. Returns false when `spec` itself
    /// is unusable, so no other rule can run.
    fn structure(&mut self) -> bool {
        match at(self.new, SPEC) {
            Some(Value::Object(_)) => {}
            None => {
                if self.changed(SPEC) {
                    self.error(FieldError::required(Rule::Structure, "spec", ""));
                }
                return false;
            }
            Some(other) => {
                if self.changed(SPEC) {
                    self.error(not_an_object(SPEC, other));
                }
                return false;
            }
        }
        for (path, required) in [(STORAGE, true), (METRICS, true), (DATA, false)] {
            self.object_field(path, required);
        }
        for path in [
            FORMAT,
            FOLDER,
            SIZE,
            DB_CONFIG,
            PV,
            RETENTION,
            FILENAME,
            DATA_FORMAT,
            SCHEDULE_PATH,
            IMAGE,
        ] {
            self.leaf_type(path, Value::is_string, "must be a string");
        }
        for path in [REPLICAS, BATCH_SIZE] {
            self.leaf_type(path, is_integer, "must be an integer");
        }
        true
    }

    fn object_field(&mut self, path: Path, required: bool) {
        if !self.changed(path) {
            return;
        }
        match at(self.new, path) {
            None if required => self.error(FieldError::required(Rule::Structure, dotted(path), "")),
            Some(value) if !value.is_object() => self.error(not_an_object(path, value)),
            _ => {}
        }
    }

    fn leaf_type(&mut self, path: Path, ok: fn(&Value) -> bool, detail: &str) {
        if let Some(value) = at(self.new, path)
            && !ok(value)
            && self.changed(path)
        {
            self.error(FieldError::type_invalid(
                Rule::Structure,
                dotted(path),
                value.clone(),
                detail,
            ));
        }
    }

    // --- spec.storage ---------------------------------------------------------------------

    fn storage(&mut self) {
        if !at(self.new, STORAGE).is_some_and(Value::is_object) {
            return;
        }
        self.storage_format();
        if self.changed(FOLDER)
            && let Some(folder) = self.str_at(FOLDER)
        {
            self.check_folder(folder);
        }
        if self.changed(SIZE)
            && let Some(size) = self.str_at(SIZE)
        {
            self.check_size(size);
        }
        if self.changed(PV)
            && let Some(pv) = self.str_at(PV)
        {
            self.check_subdomain(Rule::StoragePv, PV, pv);
        }
        self.pv_mode();
        if self.changed(DB_CONFIG)
            && let Some(secret) = self.str_at(DB_CONFIG)
        {
            self.check_subdomain(Rule::DatabaseConfigurations, DB_CONFIG, secret);
        }
        if self.changed(RETENTION)
            && let Some(policy) = self.str_at(RETENTION)
            && policy != retention::RETAIN
            && policy != retention::DELETE
        {
            self.error(FieldError::not_supported(
                Rule::StorageRetention,
                dotted(RETENTION),
                policy,
                &[retention::RETAIN, retention::DELETE],
            ));
        }
    }

    fn storage_format(&mut self) {
        if !self.changed(FORMAT) {
            return;
        }
        match at(self.new, FORMAT) {
            None => self.error(FieldError::required(
                Rule::StorageFormat,
                dotted(FORMAT),
                "",
            )),
            Some(Value::String(format))
                if format != storage_format::PVC && format != storage_format::DATABASE =>
            {
                self.error(FieldError::not_supported(
                    Rule::StorageFormat,
                    dotted(FORMAT),
                    format.as_str(),
                    &[storage_format::PVC, storage_format::DATABASE],
                ));
            }
            _ => {}
        }
    }

    fn check_folder(&mut self, folder: &str) {
        if folder.len() > FOLDER_MAX {
            self.error(FieldError::too_long(
                Rule::StorageFolder,
                dotted(FOLDER),
                folder,
                FOLDER_MAX,
            ));
        } else if !folder.starts_with('/') || DOT_DOT_SEGMENT.is_match(folder) {
            self.error(FieldError::invalid(
                Rule::StorageFolder,
                dotted(FOLDER),
                folder,
                says::FOLDER,
            ));
        }
    }

    fn check_size(&mut self, size: &str) {
        if size.len() > SIZE_MAX {
            self.error(FieldError::too_long(
                Rule::StorageSize,
                dotted(SIZE),
                size,
                SIZE_MAX,
            ));
            return;
        }
        match Quantity::parse(size) {
            Err(_) => self.error(FieldError::invalid(
                Rule::StorageSize,
                dotted(SIZE),
                size,
                says::SIZE_QUANTITY,
            )),
            Ok(quantity) if !quantity.is_positive() => self.error(FieldError::invalid(
                Rule::StorageSize,
                dotted(SIZE),
                size,
                says::SIZE_POSITIVE,
            )),
            Ok(_) => {}
        }
    }

    fn check_subdomain(&mut self, rule: Rule, path: Path, name: &str) {
        let max = patterns::DNS1123_SUBDOMAIN_MAX;
        if name.len() > max {
            self.error(FieldError::invalid(
                rule,
                dotted(path),
                name,
                format!("must be no more than {max} characters"),
            ));
        }
        if !DNS1123_SUBDOMAIN.is_match(name) {
            self.error(FieldError::invalid(
                rule,
                dotted(path),
                name,
                says::SUBDOMAIN,
            ));
        }
    }

    /// A PersistentVolume only makes sense when a PVC is made.
    fn pv_mode(&mut self) {
        if at(self.new, PV).is_some()
            && self.mode() == Some(StorageMode::Database)
            && (self.changed(PV) || self.changed_any(&MODE_FIELDS))
        {
            self.error(FieldError::forbidden(
                Rule::StoragePvMode,
                dotted(PV),
                says::PV_MODE,
            ));
        }
    }

    // --- spec.data ------------------------------------------------------------------------

    fn data(&mut self) {
        if self.changed(FILENAME)
            && let Some(filename) = self.str_at(FILENAME)
        {
            self.check_filename(filename);
        }
        if self.mode().is_some_and(StorageMode::uses_pvc)
            && let Some(format) = self.str_at(DATA_FORMAT)
            && (self.changed(DATA_FORMAT) || self.changed_any(&MODE_FIELDS))
        {
            if format.len() > DATA_FORMAT_MAX {
                self.error(FieldError::too_long(
                    Rule::DataFormat,
                    dotted(DATA_FORMAT),
                    format,
                    DATA_FORMAT_MAX,
                ));
            } else if format != defaults::DEFAULT_DATA_FORMAT {
                // The service reads only CSV from a volume.
                self.error(FieldError::not_supported(
                    Rule::DataFormat,
                    dotted(DATA_FORMAT),
                    format,
                    &[defaults::DEFAULT_DATA_FORMAT],
                ));
            }
        }
    }

    fn check_filename(&mut self, filename: &str) {
        if filename.len() > FILENAME_MAX {
            self.error(FieldError::too_long(
                Rule::DataFilename,
                dotted(FILENAME),
                filename,
                FILENAME_MAX,
            ));
        } else if matches!(filename, "" | "." | "..") || filename.contains('/') {
            self.error(FieldError::invalid(
                Rule::DataFilename,
                dotted(FILENAME),
                filename,
                says::FILENAME,
            ));
        }
    }

    // --- spec.metrics, spec.replicas, spec.image ------------------------------------------

    fn metrics(&mut self) {
        if at(self.new, METRICS).is_some_and(Value::is_object) && self.changed(SCHEDULE_PATH) {
            match at(self.new, SCHEDULE_PATH) {
                None => self.error(FieldError::required(
                    Rule::MetricsSchedule,
                    dotted(SCHEDULE_PATH),
                    "",
                )),
                Some(Value::String(schedule)) => self.check_schedule(schedule),
                Some(_) => {} // reported by structure()
            }
        }
        if self.changed(BATCH_SIZE)
            && let Some(batch) = integer_at(self.new, BATCH_SIZE)
        {
            if batch < i128::from(BATCH_SIZE_MIN) {
                self.error(integer_error(
                    Rule::MetricsBatchSize,
                    BATCH_SIZE,
                    batch,
                    format!("must be at least {BATCH_SIZE_MIN}"),
                ));
            } else if batch > i128::from(i64::MAX) {
                self.error(integer_error(
                    Rule::MetricsBatchSize,
                    BATCH_SIZE,
                    batch,
                    format!("must be at most {}", i64::MAX),
                ));
            }
        }
    }

    fn check_schedule(&mut self, schedule: &str) {
        let error = |detail: &str| {
            FieldError::invalid(
                Rule::MetricsSchedule,
                dotted(SCHEDULE_PATH),
                schedule,
                detail,
            )
        };
        if schedule.len() > SCHEDULE_MAX {
            self.error(FieldError::too_long(
                Rule::MetricsSchedule,
                dotted(SCHEDULE_PATH),
                schedule,
                SCHEDULE_MAX,
            ));
        } else if !SCHEDULE.is_match(schedule) {
            self.error(error(says::SCHEDULE));
        } else if schedule_millis(schedule) < 1000 {
            self.error(error("must be at least one second in total"));
        }
    }

    fn replicas(&mut self) {
        if !self.changed(REPLICAS) {
            return;
        }
        let Some(replicas) = integer_at(self.new, REPLICAS) else {
            return;
        };
        if replicas < i128::from(REPLICAS_MIN) {
            self.error(integer_error(
                Rule::Replicas,
                REPLICAS,
                replicas,
                format!("must be greater than or equal to {REPLICAS_MIN}"),
            ));
        } else if replicas > i128::from(i32::MAX) {
            self.error(integer_error(
                Rule::Replicas,
                REPLICAS,
                replicas,
                format!("must be at most {}", i32::MAX),
            ));
        }
    }

    fn image(&mut self) {
        if !self.changed(IMAGE) {
            return;
        }
        let Some(image) = self.str_at(IMAGE) else {
            return;
        };
        if image.len() > IMAGE_MAX {
            self.error(FieldError::too_long(
                Rule::Image,
                dotted(IMAGE),
                image,
                IMAGE_MAX,
            ));
            return;
        }
        if !IMAGE_REFERENCE.is_match(image) {
            self.error(FieldError::invalid(
                Rule::Image,
                dotted(IMAGE),
                image,
                "must be an image reference [registry/]path[:tag][@sha256:<64 hex digits>], for example quay.io/trustyai/trustyai-service:v0.28.0",
            ));
        }
        let prefixes: Vec<&str> = self
            .ctx
            .allowed_image_prefixes
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .collect();
        if prefixes.is_empty() {
            self.error(FieldError::forbidden(
                Rule::Image,
                dotted(IMAGE),
                "custom images are not allowed: the operator's configuration allows no image prefixes (allowedImagePrefixes)",
            ));
        } else if !prefixes.iter().any(|p| has_image_prefix(image, p)) {
            let list: Vec<String> = prefixes.iter().map(|p| go_quote(p)).collect();
            self.error(FieldError::invalid(
                Rule::Image,
                dotted(IMAGE),
                image,
                format!(
                    "must start with one of the allowed image prefixes: {}",
                    list.join(", ")
                ),
            ));
        }
    }

    // --- UPDATE transitions ---------------------------------------------------------------

    /// Rules about how the stored object may change. They compare with the old object as
    /// defaulted, which is what the controller acted on.
    fn transitions(&mut self, old: &OldObject<'_>) {
        let before = &old.defaulted;
        self.format_change(before);
        self.size_shrink(before);
        self.pv_change(before);
        self.folder_change(before);
    }

    fn format_change(&mut self, before: &Value) {
        let (Some(from), Some(to)) = (
            at(before, FORMAT).and_then(Value::as_str),
            self.str_at(FORMAT),
        ) else {
            return;
        };
        if from == storage_format::DATABASE && to == storage_format::PVC {
            self.error(FieldError::invalid(
                Rule::StorageFormatChange,
                dotted(FORMAT),
                to,
                says::FORMAT_BACK,
            ));
        } else if from == storage_format::PVC
            && to == storage_format::DATABASE
            && self.mode() != Some(StorageMode::Migration)
        {
            self.error(FieldError::invalid(
                Rule::StorageFormatChange,
                dotted(FORMAT),
                to,
                "may change from PVC to DATABASE only as a migration: keep spec.storage.folder and spec.data.filename set, so that the service moves the data from the volume into the database",
            ));
        }
    }

    fn size_shrink(&mut self, before: &Value) {
        let (Some(from), Some(to)) = (at(before, SIZE).and_then(Value::as_str), self.str_at(SIZE))
        else {
            return;
        };
        // An unparseable size on either side is reported (or ratcheted) by check_size.
        let (Ok(from_q), Ok(to_q)) = (Quantity::parse(from), Quantity::parse(to)) else {
            return;
        };
        if to_q < from_q {
            self.error(FieldError::invalid(
                Rule::StorageSizeShrink,
                dotted(SIZE),
                to,
                says::size_shrink(Some(&go_quote(from))),
            ));
        } else if to_q > from_q && uses_pvc(self.new) {
            // Whether it can grow depends on the claim's StorageClass, which only the cluster
            // knows: say so now rather than leave the author to find it in the status.
            self.warn(format!(
                "spec.storage.size: the PersistentVolumeClaim grows from {} to {} only if its StorageClass allows volume expansion; otherwise it keeps its size and the PVCAvailable condition says why",
                go_quote(from),
                go_quote(to)
            ));
        }
    }

    fn pv_change(&mut self, before: &Value) {
        let Some(from) = at(before, PV) else {
            return;
        };
        let was = render_value(from);
        match at(self.new, PV) {
            Some(to) if to == from => {}
            Some(to) => self.error(FieldError::invalid(
                Rule::StoragePvImmutable,
                dotted(PV),
                to.clone(),
                says::pv_changed(Some(&was)),
            )),
            // The end of a migration: the volume is no longer mounted (and the claim is kept,
            // still bound to it), so the field goes with the folder and the file name.
            None if !uses_pvc(self.new) => {}
            None => self.error(FieldError::forbidden(
                Rule::StoragePvImmutable,
                dotted(PV),
                says::pv_removed(Some(&was)),
            )),
        }
    }

    fn folder_change(&mut self, before: &Value) {
        // Only a different mount path for a volume that stays in use loses the data. Leaving
        // the volume (the end of a migration) makes the folder irrelevant; format_change
        // judges whether leaving is allowed.
        if uses_pvc(before)
            && uses_pvc(self.new)
            && let (Some(from), Some(to)) = (at(before, FOLDER), at(self.new, FOLDER))
            && from != to
        {
            self.error(FieldError::invalid(
                Rule::StorageFolderImmutable,
                dotted(FOLDER),
                to.clone(),
                format!(
                    "may not change while the PersistentVolumeClaim is in use (it is mounted at {}, where the service keeps its data)",
                    render_value(from)
                ),
            ));
        }
    }

    // --- warnings -------------------------------------------------------------------------

    fn warnings(&mut self) {
        let Some(mode) = self.mode() else {
            return;
        };
        if mode.uses_pvc()
            && let Some(replicas) = integer_at(self.new, REPLICAS)
            && replicas > 1
        {
            self.warn(format!(
                "spec.replicas: {replicas} replicas run as one pod while the data is on a claim (one writer per claim: two service processes must never have its files open at once)"
            ));
        }
        // retention is not listed for DATABASE: a volume left from an earlier PVC or
        // migration phase still follows it.
        let ignored: &[Path] = match mode {
            StorageMode::Pvc => &[DB_CONFIG],
            StorageMode::Database => &[FOLDER, SIZE, FILENAME, DATA_FORMAT],
            StorageMode::Migration => &[],
        };
        for path in ignored {
            if at(self.new, path).is_some() {
                self.warn(ignored_warning(path, mode));
            }
        }
        if mode.uses_database() {
            self.missing_secret_warning();
        }
        if mode == StorageMode::Migration
            && let Some(filename) = self.str_at(FILENAME)
            && !filename.ends_with(MIGRATED_SUFFIX)
        {
            self.warn(format!(
                "spec.data.filename: the TrustyAI service (Python) moves into the database only the files of its folder whose names end in {MIGRATED_SUFFIX}; with {} nothing is moved and the service never becomes ready",
                go_quote(filename)
            ));
        }
    }

    fn missing_secret_warning(&mut self) {
        let Some(exists) = self.ctx.secret_exists else {
            return;
        };
        let secret = match self.str_at(DB_CONFIG) {
            Some(secret) => secret.to_owned(),
            None => match self.new.pointer("/metadata/name").and_then(Value::as_str) {
                Some(name) if !name.is_empty() => format!("{name}{}", suffix::DB_CREDENTIALS),
                _ => return,
            },
        };
        // An invalid name is already an error; looking it up would only add noise.
        if DNS1123_SUBDOMAIN.is_match(&secret)
            && secret.len() <= patterns::DNS1123_SUBDOMAIN_MAX
            && !exists(&secret)
        {
            self.warn(format!(
                "spec.storage.databaseConfigurations: Secret {} does not exist yet; the service cannot start until it exists with the keys {}",
                go_quote(&secret),
                db_secret::MANDATORY.join(", ")
            ));
        }
    }
}

/// The file names the TrustyAI service (Python) migrates from its folder into the database (it
/// writes HDF5 whatever `data.filename` says, and its migration looks for `*.hdf5` only).
const MIGRATED_SUFFIX: &str = ".hdf5";

fn ignored_warning(path: Path, mode: StorageMode) -> String {
    let field = dotted(path);
    match mode {
        StorageMode::Pvc => format!("{field}: ignored with PVC storage"),
        _ => format!(
            "{field}: ignored with DATABASE storage outside migration mode (migration needs both spec.storage.folder and spec.data.filename)"
        ),
    }
}

/// The value at `path`, treating `null` as absent (the API server drops nulls of non-nullable
/// fields) and any non-object parent as absent (structure() reports it).
fn at<'v>(root: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter()
        .try_fold(root, |node, key| node.as_object()?.get(*key))
        .filter(|value| !value.is_null())
}

fn dotted(path: &[&str]) -> String {
    path.join(".")
}

fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64()
}

/// Any JSON integer, widened so that out-of-range values can be reported rather than wrapped.
fn integer_at(root: &Value, path: &[&str]) -> Option<i128> {
    let value = at(root, path)?;
    value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
}

fn integer_error(rule: Rule, path: Path, value: i128, detail: impl Into<String>) -> FieldError {
    // Serialized as JSON, the number is shown as written.
    let shown = serde_json::Number::from_i128(value)
        .map(Value::Number)
        .unwrap_or(Value::Null);
    FieldError::invalid(rule, dotted(path), shown, detail)
}

fn not_an_object(path: Path, value: &Value) -> FieldError {
    FieldError::type_invalid(
        Rule::Structure,
        dotted(path),
        value.clone(),
        "must be an object",
    )
}

fn is_being_deleted(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Total length of a schedule that matched the schedule pattern (`patterns::SCHEDULE`), in milliseconds, saturating (any
/// overflow is far above the minimum).
pub fn schedule_millis(schedule: &str) -> u128 {
    SCHEDULE_GROUP
        .captures_iter(schedule)
        .map(|group| {
            let count = group[1].parse::<u128>().unwrap_or(u128::MAX);
            let unit: u128 = match &group[2] {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                _ => 3_600_000,
            };
            count.saturating_mul(unit)
        })
        .fold(0u128, u128::saturating_add)
}

/// Whether `spec.image` may be used as written: a well-formed image reference of at most 1024
/// characters under one of `allowed_prefixes` (blank entries ignored; none left means no custom
/// image is allowed). The admission webhook's rule, for the controller, which must not run an
/// image the webhook would have refused (objects written while the webhook was down, or
/// before the allowed prefixes changed).
pub fn image_allowed(image: &str, allowed_prefixes: &[String]) -> bool {
    image.len() <= IMAGE_MAX
        && IMAGE_REFERENCE.is_match(image)
        && allowed_prefixes
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .any(|p| has_image_prefix(image, p))
}

/// `image` starts with `prefix` at a reference boundary: the prefix ends in `/`, `:` or `@`,
/// or the image continues with one of them (or ends), so `quay.io` allows `quay.io/x` but not
/// `quay.io.evil.com/x`.
fn has_image_prefix(image: &str, prefix: &str) -> bool {
    let Some(rest) = image.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with(['/', ':', '@']) || rest.is_empty() || rest.starts_with(['/', ':', '@'])
}

/// Longest rendering of an offending value in a message, in characters. A denial names the
/// field and the rule; the value is there to recognise it, so a long one (a 3 MiB array sent
/// where a quantity belongs) is cut rather than echoed (once in the message, once per cause).
const MAX_RENDERED_VALUE: usize = 512;

/// A value as the API server shows it: strings quoted like Go's `%q`, other scalars plain,
/// objects and arrays as JSON; cut after [`MAX_RENDERED_VALUE`] characters with
/// `...(truncated)`.
fn render_value(value: &Value) -> String {
    let full = match value {
        Value::String(s) if s.len() <= MAX_RENDERED_VALUE * 4 => go_quote(s),
        Value::String(s) => {
            let head: String = s.chars().take(MAX_RENDERED_VALUE + 1).collect();
            go_quote(&head)
        }
        other => {
            // Written through a bounded buffer: the JSON of a huge array is never built whole.
            let mut out = BoundedText::new(MAX_RENDERED_VALUE * 4 + 8);
            // An error here only means the buffer is full.
            let _ = serde_json::to_writer(&mut out, other);
            out.text()
        }
    };
    match full.char_indices().nth(MAX_RENDERED_VALUE) {
        Some((cut, _)) => format!("{}...(truncated)", &full[..cut]),
        None => full,
    }
}

/// A writer that keeps at most `limit` bytes and fails once more are written.
struct BoundedText {
    bytes: Vec<u8>,
    limit: usize,
}

impl BoundedText {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Vec::new(),
            limit,
        }
    }

    /// What was kept, cut back to whole characters.
    fn text(self) -> String {
        match String::from_utf8(self.bytes) {
            Ok(text) => text,
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                String::from_utf8_lossy(&e.into_bytes()[..valid]).into_owned()
            }
        }
    }
}

impl std::io::Write for BoundedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.limit.saturating_sub(self.bytes.len());
        if room == 0 {
            return Err(std::io::Error::other("value rendering is long enough"));
        }
        let taken = buf.len().min(room);
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Go's `strconv.Quote`: double quotes, backslash escapes, printable Unicode kept.
fn go_quote(s: &str) -> String {
    crate::quote::double_quoted(s, |c, out| match c {
        '\u{07}' => out.push_str("\\a"),
        '\u{08}' => out.push_str("\\b"),
        '\u{0c}' => out.push_str("\\f"),
        '\u{0b}' => out.push_str("\\v"),
        c if c.is_control() && u32::from(c) < 0x80 => {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        }
        c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        c => out.push(c),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_pattern_compiles() {
        for re in [
            &DNS1035_LABEL,
            &DNS1123_SUBDOMAIN,
            &DOT_DOT_SEGMENT,
            &SCHEDULE,
            &SCHEDULE_GROUP,
            &IMAGE_REFERENCE,
            &GENERATE_NAME_PREFIX,
        ] {
            LazyLock::force(re);
        }
    }

    #[test]
    fn field_error_display_matches_the_api_server() {
        let cases = [
            (
                FieldError::invalid(
                    Rule::StorageSize,
                    "spec.storage.size",
                    "1Gx",
                    "must be a quantity such as 1Gi or 500Mi",
                ),
                r#"spec.storage.size: Invalid value: "1Gx": must be a quantity such as 1Gi or 500Mi"#,
            ),
            (
                FieldError::required(Rule::MetricsSchedule, "spec.metrics.schedule", ""),
                "spec.metrics.schedule: Required value",
            ),
            (
                FieldError::not_supported(
                    Rule::StorageFormat,
                    "spec.storage.format",
                    "FOO",
                    &["PVC", "DATABASE"],
                ),
                r#"spec.storage.format: Unsupported value: "FOO": supported values: "PVC", "DATABASE""#,
            ),
            (
                FieldError::forbidden(Rule::StoragePvMode, "spec.storage.pv", "not here"),
                "spec.storage.pv: Forbidden: not here",
            ),
            (
                FieldError::too_long(Rule::Image, "spec.image", "x".repeat(2000), 1024),
                "spec.image: Too long: may not be more than 1024 bytes",
            ),
            (
                FieldError::type_invalid(
                    Rule::Structure,
                    "spec.storage.size",
                    json!(5),
                    "must be a string",
                ),
                "spec.storage.size: Invalid value: 5: must be a string",
            ),
            (
                FieldError::type_invalid(
                    Rule::Structure,
                    "spec",
                    json!(["a"]),
                    "must be an object",
                ),
                r#"spec: Invalid value: ["a"]: must be an object"#,
            ),
            (
                FieldError::invalid(
                    Rule::Replicas,
                    "spec.replicas",
                    -1,
                    "must be greater than or equal to 0",
                ),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
        ];
        for (error, shown) in cases {
            assert_eq!(error.to_string(), shown);
        }
    }

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        let long = render_value(&Value::Array(vec![Value::from(0); 1_000_000]));
        assert!(
            long.starts_with("[0,0,") && long.ends_with("...(truncated)"),
            "{long}"
        );
        assert_eq!(
            long.chars().count(),
            MAX_RENDERED_VALUE + "...(truncated)".len()
        );
        let text = render_value(&Value::String("é".repeat(10_000)));
        assert!(
            text.starts_with("\"éé") && text.ends_with("...(truncated)"),
            "{text}"
        );
        assert_eq!(render_value(&Value::String("1Gx".into())), "\"1Gx\"");
        assert_eq!(go_quote("line\nnext\ttab"), r#""line\nnext\ttab""#);
        assert_eq!(go_quote("\u{1}"), r#""\x01""#);
        assert_eq!(go_quote("ünïcode"), "\"ünïcode\"");
    }

    #[test]
    fn denial_messages() {
        let a = FieldError::required(Rule::MetricsSchedule, "spec.metrics.schedule", "");
        let b = FieldError::invalid(
            Rule::Replicas,
            "spec.replicas",
            -1,
            "must be greater than or equal to 0",
        );
        assert_eq!(
            denial_message("x", std::slice::from_ref(&a)),
            r#"TrustyAIService.trustyai.opendatahub.io "x" is invalid: spec.metrics.schedule: Required value"#
        );
        assert_eq!(
            denial_message("x", &[a, b]),
            r#"TrustyAIService.trustyai.opendatahub.io "x" is invalid: [spec.metrics.schedule: Required value, spec.replicas: Invalid value: -1: must be greater than or equal to 0]"#
        );
        assert_eq!(
            denial_message("x", &[]),
            r#"TrustyAIService.trustyai.opendatahub.io "x" is invalid"#
        );
    }

    #[test]
    fn schedule_totals() {
        for (schedule, millis) in [
            ("5s", 5_000),
            ("1m30s", 90_000),
            ("1h", 3_600_000),
            ("999ms", 999),
            ("500ms500ms", 1_000),
            ("1ms1s", 1_001),
            ("0s", 0),
        ] {
            assert_eq!(schedule_millis(schedule), millis, "{schedule}");
        }
        assert_eq!(
            schedule_millis("99999999999999999999999999999999999999999h"),
            u128::MAX
        );
    }

    #[test]
    fn image_allowed_needs_a_reference_under_a_prefix() {
        let prefixes = vec!["quay.io/trustyai/".to_owned(), " ".to_owned()];
        assert!(image_allowed("quay.io/trustyai/svc:v1", &prefixes));
        assert!(!image_allowed("docker.io/evil/svc:v1", &prefixes));
        assert!(!image_allowed("quay.io/trustyai/SVC:v1", &prefixes));
        assert!(!image_allowed("quay.io/trustyai/svc:v1", &[]));
        assert!(!image_allowed("quay.io/trustyai/svc:v1", &[" ".to_owned()]));
    }

    #[test]
    fn image_prefix_boundaries() {
        for (image, prefix, ok) in [
            ("quay.io/trustyai/svc:v1", "quay.io/trustyai/", true),
            ("quay.io/trustyai/svc:v1", "quay.io/trustyai", true),
            ("quay.io/trustyai/svc:v1", "quay.io", true),
            ("quay.io.evil.com/trustyai/svc", "quay.io", false),
            ("quay.io/trustyaievil/svc", "quay.io/trustyai", false),
            ("quay.io/trustyai/svc:v1", "quay.io/trustyai/svc:", true),
            ("quay.io/trustyai/svc:v1", "quay.io/trustyai/svc", true),
            ("quay.io/trustyai/svc", "quay.io/trustyai/svc", true),
            ("docker.io/x", "quay.io/", false),
        ] {
            assert_eq!(has_image_prefix(image, prefix), ok, "{image} vs {prefix}");
        }
    }

    #[test]
    fn rule_identifiers_are_unique_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for rule in Rule::ALL {
            let id = rule.as_str();
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{id}"
            );
            assert!(seen.insert(id), "{id} twice");
            assert_eq!(rule.to_string(), id);
        }
    }

    #[test]
    fn cause_types() {
        assert_eq!(ErrorKind::Invalid.cause_type(), "FieldValueInvalid");
        assert_eq!(ErrorKind::Required.cause_type(), "FieldValueRequired");
        assert_eq!(
            ErrorKind::NotSupported.cause_type(),
            "FieldValueNotSupported"
        );
        assert_eq!(ErrorKind::Forbidden.cause_type(), "FieldValueForbidden");
        assert_eq!(ErrorKind::TooLong.cause_type(), "FieldValueTooLong");
        assert_eq!(ErrorKind::TypeInvalid.cause_type(), "FieldValueTypeInvalid");
    }
}
