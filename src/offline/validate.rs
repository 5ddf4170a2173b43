//! `trustyai-operator validate`: the admission webhooks' defaulting and validation applied to
//! manifest files, so that CI pipelines and GitOps repositories learn what `kubectl apply` would
//! refuse before anything reaches a cluster.
//!
//! Each TrustyAIService (v1, or v1alpha1 converted to v1 first, as the API server does for the
//! webhooks) is defaulted and validated with CREATE semantics, or with UPDATE semantics when
//! `--old` holds a stored object of the same namespace and name. Each TrustyAIMetric
//! (`v1alpha1`) is judged as the webhooks judge it on CREATE: a deprecated `spec.type` replaced
//! by its current name, with the webhook's warning, then every rule (`--old` is not consulted
//! for TrustyAIMetrics). Documents of other kinds are
//! skipped with a note: GitOps folders mix kinds, and they are not this tool's to judge.
//! `kind: List` documents (what `kubectl get -o yaml` writes) are expanded into their items.
//!
//! Two things the webhooks see that a file cannot hold are left out: whether the database
//! credentials Secret exists (no cluster is asked), and the merge `kubectl apply` makes with the
//! stored object (the document replaces the `--old` object, as with `kubectl replace`).
//!
//! Output: diagnostics (one line per violation, warnings, skipped documents, a summary) go to
//! stderr; `--show-defaults` prints the defaulted objects as a YAML stream on stdout, so that it
//! can be piped. Exit status: 0 when every TrustyAIService and TrustyAIMetric is valid, 1 when
//! any is not, 2 when the input cannot be read.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, KIND, STORAGE_VERSION};
use trustyai_crds::defaults::Operation;
use trustyai_crds::manifests::{ManifestError, TextFormat, parse_documents, render_documents};
use trustyai_crds::metric;
use trustyai_crds::review::{AdmissionStep, review};
use trustyai_crds::validation::{FieldError, Rule, ValidationContext, Verdict};

use super::lists::{Document, ItemDefaults, classify, list_items};

use crate::cli::ValidateArgs;

/// Exit status when every TrustyAIService is valid.
pub const EXIT_VALID: u8 = 0;
/// Exit status when some TrustyAIService is invalid.
pub const EXIT_INVALID: u8 = 1;
/// Exit status when the input cannot be read or parsed.
pub const EXIT_UNREADABLE: u8 = 2;

/// Why the input could not be read (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {input}")]
    Read {
        /// The file, or `stdin`.
        input: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{input}")]
    Parse {
        /// The file, or `stdin`.
        input: String,
        #[source]
        source: ManifestError,
    },
    #[error("-f and --old cannot both read stdin")]
    BothStdin,
    #[error("--old {location}: {problem}")]
    Old {
        /// Where in the `--old` input.
        location: Location,
        /// What is wrong with that stored object.
        problem: String,
    },
    #[error("cannot write the output")]
    Write(#[source] std::io::Error),
    #[error("cannot render the defaulted objects")]
    Render(#[source] ManifestError),
}

/// Settings the webhooks take from the operator's configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Prefixes `spec.image` may start with (`--allowed-image-prefixes`, as for `run`).
    pub allowed_image_prefixes: Vec<String>,
}

/// Where a document is in its input: the 1-based document of the YAML stream and, for a
/// `kind: List`, the 1-based item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Position in the stream, counting only non-empty documents.
    pub document: usize,
    /// Position in the document's `items`, when it is a list.
    pub item: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(item) = self.item {
            write!(f, " item {item}")?;
        }
        Ok(())
    }
}

/// What was decided about one document.
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentVerdict {
    /// Not a TrustyAIService: left alone.
    Skipped {
        /// Why, for the note.
        reason: String,
    },
    /// A TrustyAIService that could not be checked at all (an unknown version, an ambiguous
    /// `--old` match); counts as invalid.
    Unusable {
        /// What is wrong, in the field-error style.
        problems: Vec<String>,
    },
    /// Defaulted and validated.
    Checked {
        /// CREATE, or UPDATE against the matched `--old` object.
        operation: Operation,
        /// Where the stored object came from, on UPDATE.
        old: Option<Location>,
        /// Errors and warnings, exactly as the webhooks would answer.
        verdict: Verdict,
        /// The object in v1 with the defaults the mutating webhook adds.
        defaulted: Value,
    },
    /// A TrustyAIMetric, defaulted and validated with CREATE semantics.
    Metric {
        /// Every violated rule, in the field-error style (`spec.model: Required value: ...`).
        errors: Vec<String>,
        /// The mutating webhook's warnings (a deprecated type name replaced).
        warnings: Vec<String>,
        /// The object as the mutating webhook leaves it.
        defaulted: Value,
    },
}

/// One document of the input and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentReport {
    /// Where the document is.
    pub location: Location,
    /// How it is named in messages: `namespace/name`, or with its kind when it was skipped.
    pub label: String,
    /// The decision.
    pub outcome: DocumentVerdict,
}

/// The result of validating a whole input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Every document, in input order.
    pub documents: Vec<DocumentReport>,
}

impl Report {
    /// No TrustyAIService is invalid or unusable.
    pub fn is_valid(&self) -> bool {
        self.documents.iter().all(|doc| match &doc.outcome {
            DocumentVerdict::Skipped { .. } => true,
            DocumentVerdict::Unusable { .. } => false,
            DocumentVerdict::Checked { verdict, .. } => verdict.is_allowed(),
            DocumentVerdict::Metric { errors, .. } => errors.is_empty(),
        })
    }

    /// The exit status: [`EXIT_VALID`] or [`EXIT_INVALID`].
    pub fn exit_code(&self) -> u8 {
        if self.is_valid() {
            EXIT_VALID
        } else {
            EXIT_INVALID
        }
    }

    /// The diagnostic lines: per document its violations (one line each, prefixed with the
    /// document), warnings, or a note; then a summary.
    pub fn diagnostics(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let (mut valid, mut invalid, mut skipped) = (0usize, 0usize, 0usize);
        let (mut valid_metrics, mut invalid_metrics) = (0usize, 0usize);
        for doc in &self.documents {
            let head = format!("{} ({})", doc.location, doc.label);
            match &doc.outcome {
                DocumentVerdict::Skipped { reason } => {
                    skipped += 1;
                    lines.push(format!("{head}: skipped: {reason}"));
                }
                DocumentVerdict::Unusable { problems } => {
                    invalid += 1;
                    lines.extend(problems.iter().map(|p| format!("{head}: {p}")));
                }
                DocumentVerdict::Checked {
                    operation,
                    old,
                    verdict,
                    ..
                } => {
                    if verdict.is_allowed() {
                        valid += 1;
                        let how = match (operation, old) {
                            (Operation::Update, Some(old)) => {
                                format!(" as an update of --old {old}")
                            }
                            _ => String::new(),
                        };
                        lines.push(format!("{head}: valid{how}"));
                    } else {
                        invalid += 1;
                    }
                    lines.extend(verdict.errors.iter().map(|e| format!("{head}: {e}")));
                    lines.extend(
                        verdict
                            .warnings
                            .iter()
                            .map(|w| format!("{head}: warning: {w}")),
                    );
                }
                DocumentVerdict::Metric {
                    errors, warnings, ..
                } => {
                    if errors.is_empty() {
                        valid_metrics += 1;
                        lines.push(format!("{head}: valid"));
                    } else {
                        invalid_metrics += 1;
                    }
                    lines.extend(errors.iter().map(|e| format!("{head}: {e}")));
                    lines.extend(warnings.iter().map(|w| format!("{head}: warning: {w}")));
                }
            }
        }
        let checked = valid + invalid;
        let mut summary = format!(
            "{checked} {KIND}{} checked: {valid} valid, {invalid} invalid",
            plural(checked)
        );
        // Named only when there are any: a manifest without metrics reads as it always did.
        let metrics = valid_metrics + invalid_metrics;
        if metrics > 0 {
            summary.push_str(&format!(
                "; {metrics} {}{} checked: {valid_metrics} valid, {invalid_metrics} invalid",
                metric::validation::KIND,
                plural(metrics)
            ));
        }
        if skipped > 0 {
            summary.push_str(&format!(
                "; {skipped} other document{} skipped",
                plural(skipped)
            ));
        }
        lines.push(summary);
        lines
    }

    /// The defaulted objects of the checked TrustyAIServices and TrustyAIMetrics, in input
    /// order.
    pub fn defaulted_objects(&self) -> Vec<Value> {
        self.documents
            .iter()
            .filter_map(|doc| match &doc.outcome {
                DocumentVerdict::Checked { defaulted, .. }
                | DocumentVerdict::Metric { defaulted, .. } => Some(defaulted.clone()),
                _ => None,
            })
            .collect()
    }

    /// [`Report::defaulted_objects`] as a YAML stream.
    pub fn defaulted_yaml(&self) -> Result<String, ManifestError> {
        render_documents(&self.defaulted_objects(), TextFormat::Yaml)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Validates every TrustyAIService in `new` (YAML or JSON text, several documents allowed), with
/// UPDATE semantics for those that `old` holds a stored object of (matched by namespace and
/// name).
pub fn validate_text(
    new: &str,
    old: Option<&str>,
    options: &Options,
) -> Result<Report, InputError> {
    validate_inputs(("-f", new), old.map(|text| ("--old", text)), options)
}

/// As [`validate_text`], naming the inputs in parse errors.
fn validate_inputs(
    (new_name, new): (&str, &str),
    old: Option<(&str, &str)>,
    options: &Options,
) -> Result<Report, InputError> {
    let documents = expand(parse(new_name, new)?);
    let stored = match old {
        Some((old_name, text)) => StoredObjects::index(expand(parse(old_name, text)?))?,
        None => StoredObjects::default(),
    };
    let ctx = ValidationContext {
        allowed_image_prefixes: options.allowed_image_prefixes.clone(),
        // No cluster to ask: the missing-Secret warning is the webhook's alone.
        secret_exists: None,
    };
    let documents = documents
        .into_iter()
        .map(|(location, document)| check(location, &document, &stored, &ctx))
        .collect();
    Ok(Report { documents })
}

fn parse(input: &str, text: &str) -> Result<Vec<Value>, InputError> {
    parse_documents(text).map_err(|source| InputError::Parse {
        input: input.to_owned(),
        source,
    })
}

/// The documents with their locations, `List`s expanded into their items.
fn expand(documents: Vec<Value>) -> Vec<(Location, Value)> {
    let mut out = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        let at = |item| Location {
            document: i + 1,
            item,
        };
        let Some(items) = list_items(&document).cloned() else {
            out.push((at(None), document));
            continue;
        };
        let defaults = ItemDefaults::of(&document);
        for (j, mut item) in items.into_iter().enumerate() {
            defaults.fill(&mut item);
            out.push((at(Some(j + 1)), item));
        }
    }
    out
}

fn meta_str<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `namespace/name`, `name`, `generateName*` or `unnamed`.
fn object_label(object: &Value) -> String {
    match (meta_str(object, "namespace"), meta_str(object, "name")) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_owned(),
        (_, None) => match meta_str(object, "generateName") {
            Some(prefix) => format!("{prefix}*"),
            None => "unnamed".to_owned(),
        },
    }
}

fn v1_api_version() -> String {
    format!("{GROUP}/{STORAGE_VERSION}")
}

/// The object in v1, as the API server hands it to the webhooks (`matchPolicy: Equivalent`).
fn to_v1(document: &Value) -> Result<Value, String> {
    trustyai_crds::conversion::in_storage_version(document)
        .map(std::borrow::Cow::into_owned)
        .map_err(|e| crate::error_chain::chain_text(&e))
}

fn missing_api_version() -> String {
    FieldError::required(
        Rule::Structure,
        "apiVersion",
        "the API server needs it to find the kind",
    )
    .to_string()
}

fn unsupported_version(api_version: &str) -> String {
    let supported = [v1_api_version(), format!("{GROUP}/{DEPRECATED_VERSION}")];
    let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
    FieldError::not_supported(Rule::Structure, "apiVersion", api_version, &supported).to_string()
}

fn check(
    location: Location,
    document: &Value,
    stored: &StoredObjects,
    ctx: &ValidationContext<'_>,
) -> DocumentReport {
    let report = |label: String, outcome| DocumentReport {
        location,
        label,
        outcome,
    };
    if let Some(outcome) = check_metric(document) {
        return report(object_label(document), outcome);
    }
    match classify(document) {
        Document::Other => {
            let type_meta = |key: &str| document.get(key).and_then(Value::as_str);
            let what = match (type_meta("apiVersion"), type_meta("kind")) {
                (Some(api_version), Some(kind)) => format!("{api_version} {kind}"),
                _ => "no apiVersion and kind".to_owned(),
            };
            let label = if document.is_object() {
                format!("{what} {}", object_label(document))
            } else {
                "not an object".to_owned()
            };
            tracing::debug!(%location, %label, "skipped");
            return report(
                label,
                DocumentVerdict::Skipped {
                    reason: format!("not a {GROUP} {KIND}"),
                },
            );
        }
        Document::UnknownVersion(api_version) => {
            return report(
                object_label(document),
                DocumentVerdict::Unusable {
                    problems: vec![unsupported_version(api_version)],
                },
            );
        }
        Document::MissingApiVersion => {
            return report(
                object_label(document),
                DocumentVerdict::Unusable {
                    problems: vec![missing_api_version()],
                },
            );
        }
        Document::Ours => {}
    }
    let label = object_label(document);
    // Conversion keeps the name and namespace, so the document's own find the stored object.
    let old = match stored.find(document) {
        Ok(old) => old,
        Err(problem) => {
            return report(
                label,
                DocumentVerdict::Unusable {
                    problems: vec![problem],
                },
            );
        }
    };
    let operation = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    // The mutating webhook runs first, and the validating webhook sees its result: the whole
    // chain is the defaulting step's review.
    let (defaulted, verdict) = match review(
        document,
        old.map(|o| &o.object),
        AdmissionStep::Default(operation),
        ctx,
    ) {
        Ok(reviewed) => (reviewed.object.into_owned(), reviewed.verdict),
        Err(e) => {
            return report(
                label,
                DocumentVerdict::Unusable {
                    problems: vec![format!(
                        "cannot convert to v1: {}",
                        crate::error_chain::chain_text(&e)
                    )],
                },
            );
        }
    };
    tracing::debug!(%location, %label, ?operation, errors = verdict.errors.len(), "checked");
    report(
        label,
        DocumentVerdict::Checked {
            operation,
            old: old.map(|o| o.location),
            verdict,
            defaulted,
        },
    )
}

/// The verdict on `document` when it is a TrustyAIMetric of our group; `None` for any other
/// kind. Defaulting is the mutating webhook's, so the warning and the judged object are its.
fn check_metric(document: &Value) -> Option<DocumentVerdict> {
    let kind = metric::validation::KIND;
    if document.get("kind").and_then(Value::as_str) != Some(kind) {
        return None;
    }
    let metric_version = format!("{GROUP}/v1alpha1");
    match document.get("apiVersion").map(|v| v.as_str()) {
        None => {
            return Some(DocumentVerdict::Unusable {
                problems: vec![missing_api_version()],
            });
        }
        Some(Some(v)) if v == metric_version => {}
        Some(Some(v)) if v.starts_with(&format!("{GROUP}/")) => {
            let problem = FieldError::not_supported(
                Rule::Structure,
                "apiVersion",
                v,
                &[metric_version.as_str()],
            );
            return Some(DocumentVerdict::Unusable {
                problems: vec![problem.to_string()],
            });
        }
        // Another group's kind of that name: not ours to judge.
        Some(_) => return None,
    }
    let mut defaulted = document.clone();
    let changes = metric::defaults::apply_defaults(&mut defaulted);
    let errors = metric::validation::validate_object(&defaulted)
        .iter()
        .map(ToString::to_string)
        .collect();
    Some(DocumentVerdict::Metric {
        errors,
        warnings: changes.warnings,
        defaulted,
    })
}

/// A TrustyAIService from `--old`, in v1.
struct Stored {
    location: Location,
    namespace: Option<String>,
    object: Value,
}

/// The `--old` TrustyAIServices by name.
#[derive(Default)]
struct StoredObjects {
    by_name: HashMap<String, Vec<Stored>>,
}

impl StoredObjects {
    /// Indexes the TrustyAIServices among `documents`; other kinds are ignored. A stored object
    /// must have a name, be convertible, and appear once.
    fn index(documents: Vec<(Location, Value)>) -> Result<Self, InputError> {
        let mut index = Self::default();
        for (location, document) in documents {
            let problem = |problem: String| InputError::Old { location, problem };
            match classify(&document) {
                Document::Other => continue,
                Document::UnknownVersion(api_version) => {
                    return Err(problem(unsupported_version(api_version)));
                }
                Document::MissingApiVersion => return Err(problem(missing_api_version())),
                Document::Ours => {}
            }
            let object =
                to_v1(&document).map_err(|e| problem(format!("cannot convert to v1: {e}")))?;
            let Some(name) = meta_str(&object, "name").map(str::to_owned) else {
                return Err(problem(
                    "metadata.name: Required value: a stored object has a name".into(),
                ));
            };
            let namespace = meta_str(&object, "namespace").map(str::to_owned);
            let entries = index.by_name.entry(name).or_default();
            if let Some(first) = entries.iter().find(|s| s.namespace == namespace) {
                return Err(problem(format!(
                    "{} appears twice (also in {})",
                    object_label(&object),
                    first.location
                )));
            }
            entries.push(Stored {
                location,
                namespace,
                object,
            });
        }
        Ok(index)
    }

    /// The stored object `new` updates: same name, and the same namespace or (when either side
    /// leaves it out, as manifests often do) the only one of that name. `None` means CREATE.
    fn find(&self, new: &Value) -> Result<Option<&Stored>, String> {
        let Some(name) = meta_str(new, "name") else {
            // generateName: always a new object.
            return Ok(None);
        };
        let Some(candidates) = self.by_name.get(name) else {
            return Ok(None);
        };
        let namespace = meta_str(new, "namespace");
        if let Some(exact) = candidates
            .iter()
            .find(|s| s.namespace.as_deref() == namespace)
        {
            return Ok(Some(exact));
        }
        let loose: Vec<&Stored> = candidates
            .iter()
            .filter(|s| namespace.is_none() || s.namespace.is_none())
            .collect();
        match loose.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            many => {
                let places: Vec<String> = many
                    .iter()
                    .map(|s| {
                        format!(
                            "{} in {}",
                            s.namespace.as_deref().unwrap_or("no namespace"),
                            s.location
                        )
                    })
                    .collect();
                Err(format!(
                    "metadata.namespace: Required value: --old holds several objects named {name:?} ({}); set the namespace to choose one",
                    places.join(", ")
                ))
            }
        }
    }
}

/// Reads a file, or stdin for `-`.
fn read_input(path: &Path) -> Result<(String, String), InputError> {
    super::read_input(path).map_err(|(input, source)| InputError::Read { input, source })
}

/// Reads the inputs, validates and renders, or says why the input is unreadable.
fn execute(args: &ValidateArgs) -> Result<(Report, Option<String>), InputError> {
    let stdin = Path::new("-");
    if args.file == stdin && args.old.as_deref() == Some(stdin) {
        return Err(InputError::BothStdin);
    }
    let (new_name, new) = read_input(&args.file)?;
    let old = args.old.as_deref().map(read_input).transpose()?;
    let options = Options {
        allowed_image_prefixes: args.image_prefixes.allowed_image_prefixes.clone(),
    };
    let report = validate_inputs(
        (&new_name, &new),
        old.as_ref()
            .map(|(name, text)| (name.as_str(), text.as_str())),
        &options,
    )?;
    let yaml = if args.show_defaults {
        Some(report.defaulted_yaml().map_err(InputError::Render)?)
    } else {
        None
    };
    Ok((report, yaml))
}

/// Runs `validate`: diagnostics on stderr, `--show-defaults` YAML on stdout.
pub fn run(args: &ValidateArgs) -> ExitCode {
    let (report, yaml) = match execute(args) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("error: {}", crate::error_chain::Chain(&e));
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let mut stderr = std::io::stderr().lock();
    for line in report.diagnostics() {
        // stderr failing leaves no channel to complain on; the exit status still tells.
        let _ = writeln!(stderr, "{line}");
    }
    if let Some(yaml) = yaml {
        let mut stdout = std::io::stdout().lock();
        let written = stdout
            .write_all(yaml.as_bytes())
            .and_then(|()| stdout.flush());
        if let Err(e) = written {
            let _ = writeln!(stderr, "error: {}", InputError::Write(e));
            return ExitCode::from(EXIT_UNREADABLE);
        }
    }
    ExitCode::from(report.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            allowed_image_prefixes: vec!["quay.io/trustyai/".into()],
        }
    }

    fn lines(report: &Report) -> String {
        report.diagnostics().join("\n")
    }

    const VALID: &str = "apiVersion: trustyai.opendatahub.io/v1\nkind: TrustyAIService\nmetadata: {name: tas, namespace: ns}\nspec: {storage: {format: PVC}, metrics: {schedule: 5s}}\n";

    /// The report on [`VALID`].
    fn valid_report() -> Report {
        validate_text(VALID, None, &options()).expect("readable")
    }

    #[test]
    fn a_valid_object_is_defaulted() {
        let report = valid_report();
        let defaulted = report.defaulted_objects();
        assert_eq!(defaulted[0]["spec"]["storage"]["size"], "1Gi");
    }

    #[test]
    fn a_valid_object_passes() {
        let report = valid_report();
        assert!(report.is_valid(), "{}", lines(&report));
        assert_eq!(report.exit_code(), EXIT_VALID);
        assert_eq!(
            report.diagnostics(),
            [
                "document 1 (ns/tas): valid",
                "1 TrustyAIService checked: 1 valid, 0 invalid"
            ]
        );
    }

    /// The report on [`VALID`] then an object with three violations.
    fn one_valid_one_invalid_report() -> Report {
        let text = format!(
            "{VALID}---\napiVersion: trustyai.opendatahub.io/v1\nkind: TrustyAIService\nmetadata: {{name: bad}}\nspec: {{image: docker.io/x/y:1, storage: {{format: PVC}}, data: {{format: JSON}}, metrics: {{schedule: 500ms}}}}\n"
        );
        validate_text(&text, None, &options()).expect("readable")
    }

    #[test]
    fn an_invalid_object_makes_the_exit_code_invalid() {
        let report = one_valid_one_invalid_report();
        assert_eq!(report.exit_code(), EXIT_INVALID);
    }

    #[test]
    fn every_violation_gets_a_line_saying_where_it_is() {
        let shown = lines(&one_valid_one_invalid_report());
        for field in ["spec.image", "spec.data.format", "spec.metrics.schedule"] {
            assert!(
                shown.contains(&format!("document 2 (bad): {field}: ")),
                "{field}: {shown}"
            );
        }
    }

    #[test]
    fn the_summary_counts_the_checked_objects_by_verdict() {
        let shown = lines(&one_valid_one_invalid_report());
        assert!(
            shown.contains("2 TrustyAIServices checked: 1 valid, 1 invalid"),
            "{shown}"
        );
    }

    /// The report on a List of a ConfigMap and a valid TrustyAIService.
    fn config_map_and_service_list_report() -> Report {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}},
            {"apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "metadata": {"name": "tas"},
             "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}}]}"#;
        validate_text(text, None, &options()).expect("readable")
    }

    #[test]
    fn other_kinds_are_skipped() {
        let report = config_map_and_service_list_report();
        assert!(report.is_valid());
        let shown = lines(&report);
        assert!(
            shown.contains("document 1 item 1 (v1 ConfigMap ns/cm): skipped"),
            "{shown}"
        );
    }

    #[test]
    fn list_items_are_checked_one_by_one() {
        let shown = lines(&config_map_and_service_list_report());
        assert!(shown.contains("document 1 item 2 (tas): valid"), "{shown}");
    }

    #[test]
    fn items_of_a_typed_list_are_checked_as_its_kind() {
        let text = "apiVersion: trustyai.opendatahub.io/v1alpha1\nkind: TrustyAIServiceList\nitems:\n- metadata: {name: a}\n  spec: {storage: {format: PVC}, metrics: {schedule: 5s}}\n";
        let report = validate_text(text, None, &options()).expect("readable");
        assert!(matches!(
            report.documents[0].outcome,
            DocumentVerdict::Checked { .. }
        ));
    }

    #[test]
    fn an_unknown_version_of_our_kind_is_invalid() {
        let text = VALID.replace("/v1\n", "/v2\n");
        let report = validate_text(&text, None, &options()).expect("readable");
        assert_eq!(report.exit_code(), EXIT_INVALID);
        assert!(
            lines(&report)
                .contains(r#"apiVersion: Unsupported value: "trustyai.opendatahub.io/v2""#)
        );
    }

    /// The report on our kind without apiVersion then another group's TrustyAIService.
    fn bare_then_another_groups_report() -> Report {
        let text = "kind: TrustyAIService\nmetadata: {name: bare}\nspec: {storage: {format: PVC}, metrics: {schedule: 5s}}\n---\napiVersion: example.com/v1\nkind: TrustyAIService\nmetadata: {name: theirs}\n";
        validate_text(text, None, &options()).expect("readable")
    }

    #[test]
    fn our_kind_without_api_version_is_invalid() {
        let report = bare_then_another_groups_report();
        assert_eq!(report.exit_code(), EXIT_INVALID);
        let shown = lines(&report);
        assert!(shown.contains("apiVersion: Required value"), "{shown}");
    }

    #[test]
    fn another_groups_trustyaiservice_is_skipped() {
        let shown = lines(&bare_then_another_groups_report());
        assert!(
            shown.contains("document 2 (example.com/v1 TrustyAIService theirs): skipped"),
            "{shown}"
        );
    }

    #[test]
    fn an_update_is_checked_against_the_stored_object_it_names() {
        let old = VALID.replace("format: PVC}", "format: PVC, size: 2Gi}");
        let new = VALID.replace("format: PVC}", "format: PVC, size: 1Gi}");
        let report = validate_text(&new, Some(&old), &options()).expect("readable");
        let shown = lines(&report);
        assert!(shown.contains("spec.storage.size"), "{shown}");
        let DocumentVerdict::Checked { operation, .. } = &report.documents[0].outcome else {
            panic!("{shown}");
        };
        assert_eq!(*operation, Operation::Update);
        // Another namespace is another object: CREATE, and a 1Gi PVC is fine.
        let elsewhere = new.replace("namespace: ns", "namespace: other");
        let report = validate_text(&elsewhere, Some(&old), &options()).expect("readable");
        assert!(report.is_valid(), "{}", lines(&report));
        // No namespace in the manifest: the only stored object of that name.
        let bare = new.replace(", namespace: ns", "");
        let report = validate_text(&bare, Some(&old), &options()).expect("readable");
        assert!(!report.is_valid());
    }

    #[test]
    fn a_name_stored_in_two_namespaces_needs_a_namespace() {
        let a = VALID.to_owned();
        let b = VALID.replace("namespace: ns", "namespace: other");
        let bare = VALID.replace(", namespace: ns", "");
        let report =
            validate_text(&bare, Some(&format!("{a}---\n{b}")), &options()).expect("readable");
        assert!(lines(&report).contains("metadata.namespace: Required value"));
    }

    #[test]
    fn a_stored_object_given_twice_is_an_input_error() {
        let a = VALID.to_owned();
        let err = validate_text(VALID, Some(&format!("{a}---\n{a}")), &options())
            .expect_err("a duplicate stored object");
        assert!(err.to_string().contains("appears twice"), "{err}");
    }

    const METRIC: &str = "apiVersion: trustyai.opendatahub.io/v1alpha1\nkind: TrustyAIMetric\nmetadata: {name: m, namespace: ns}\nspec: {model: demo-model, type: spd, protectedAttribute: gender, privilegedValue: 1, unprivilegedValue: 0, outcomeName: income, favorableOutcome: 1}\n";

    /// The report on [`METRIC`].
    fn valid_metric_report() -> Report {
        validate_text(METRIC, None, &options()).expect("report")
    }

    #[test]
    fn a_valid_metric_passes() {
        let report = valid_metric_report();
        assert!(report.is_valid(), "{}", lines(&report));
        let text = lines(&report);
        assert!(text.contains("document 1 (ns/m): valid"), "{text}");
        assert_eq!(report.defaulted_objects().len(), 1);
    }

    #[test]
    fn metrics_get_their_own_count_in_the_summary() {
        let text = lines(&valid_metric_report());
        assert!(
            text.contains("; 1 TrustyAIMetric checked: 1 valid, 0 invalid"),
            "{text}"
        );
    }

    #[test]
    fn a_metric_alias_is_defaulted_with_the_webhooks_warning() {
        let text = METRIC.replace("type: spd, protectedAttribute: gender, privilegedValue: 1, unprivilegedValue: 0, outcomeName: income, favorableOutcome: 1", "type: meanshift");
        let report = validate_text(&text, None, &options()).expect("report");
        assert!(report.is_valid(), "{}", lines(&report));
        assert_eq!(
            report.defaulted_objects()[0]["spec"]["type"],
            "comparemeans"
        );
        let out = lines(&report);
        assert!(
            out.contains("(ns/m): warning: spec.type: \"meanshift\""),
            "{out}"
        );
    }

    #[test]
    fn a_broken_metric_gets_a_line_per_field() {
        let text = METRIC
            .replace("protectedAttribute: gender, ", "")
            .replace("model: demo-model", "model: ''");
        let report = validate_text(&text, None, &options()).expect("report");
        assert_eq!(report.exit_code(), EXIT_INVALID);
        let out = lines(&report);
        for field in [
            "spec.model: Required value",
            "spec.protectedAttribute: Required value",
        ] {
            assert!(
                out.contains(&format!("document 1 (ns/m): {field}")),
                "{out}"
            );
        }
        assert!(
            out.contains("1 TrustyAIMetric checked: 0 valid, 1 invalid"),
            "{out}"
        );
    }

    #[test]
    fn a_metric_in_an_unknown_version_is_invalid() {
        let text = METRIC.replace("v1alpha1", "v9");
        let report = validate_text(&text, None, &options()).expect("report");
        assert_eq!(report.exit_code(), EXIT_INVALID);
        assert!(
            lines(&report).contains("apiVersion: Unsupported value"),
            "{}",
            lines(&report)
        );
    }

    #[test]
    fn unparseable_input_is_an_input_error() {
        let err = validate_text("a: [\n", None, &options()).expect_err("broken YAML");
        assert!(matches!(err, InputError::Parse { .. }), "{err}");
    }
}
