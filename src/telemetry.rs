//! Logging setup: `tracing` as flat JSON records for collectors, or readable text for terminals.
//!
//! A JSON record is one object with unique keys: `timestamp`, `level`, `target`, `span` (the
//! names of the spans it is in, outermost first), `message`, the event's fields, then the fields
//! of its spans (`kind`, `namespace`, `name` of the object a reconcile or a webhook request is
//! about) at the top level, so a query needs no knowledge of which span set them. Where a span's
//! field has the same key as one the record already holds with another value, it is written as
//! `<span>.<key>`, so nothing is lost or written twice.

use std::fmt;
use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::cli::{LogArgs, LogFormat};

/// Errors setting up logging.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("invalid log filter {filter:?}")]
    Filter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("a global logger is already installed: {0}")]
    Install(String),
}

/// Installs the global subscriber. Logs go to stderr so that commands which print YAML to
/// stdout (`crd`, `convert`) stay pipeable; text has colours only when stderr is a terminal and
/// `NO_COLOR` is unset.
pub fn init(args: &LogArgs) -> Result<(), TelemetryError> {
    let filter = EnvFilter::try_new(&args.log_level).map_err(|source| TelemetryError::Filter {
        filter: args.log_level.clone(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match args.log_format {
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .try_init(),
        LogFormat::Text => {
            let colours = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            builder.with_ansi(colours).try_init()
        }
    };
    result.map_err(|e| TelemetryError::Install(e.to_string()))
}

/// The flat JSON record described in the module documentation.
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let record = flat_record(ctx, event);
        let line = serde_json::to_string(&record).map_err(|_| fmt::Error)?;
        writeln!(writer, "{line}")
    }
}

fn flat_record<S, N>(ctx: &FmtContext<'_, S, N>, event: &Event<'_>) -> Map<String, Value>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let mut record = Map::new();
    let metadata = event.metadata();
    record.insert("timestamp".into(), Value::String(timestamp()));
    record.insert("level".into(), Value::String(metadata.level().to_string()));
    record.insert("target".into(), Value::String(metadata.target().to_owned()));
    let mut spans: Vec<(&'static str, Map<String, Value>)> = Vec::new();
    if let Some(scope) = ctx.event_scope() {
        for span in scope.from_root() {
            let extensions = span.extensions();
            // `JsonFields` keeps a span's fields as the text of a JSON object.
            let fields = extensions
                .get::<FormattedFields<N>>()
                .and_then(|f| serde_json::from_str::<Map<String, Value>>(f.as_str()).ok())
                .unwrap_or_default();
            spans.push((span.name(), fields));
        }
    }
    if !spans.is_empty() {
        let names: Vec<&str> = spans.iter().map(|(name, _)| *name).collect();
        record.insert("span".into(), Value::String(names.join(":")));
    }
    event.record(&mut FieldsInto(&mut record));
    // Innermost span first: its fields describe the record best.
    for (span, fields) in spans.into_iter().rev() {
        for (key, value) in fields {
            match record.get(&key) {
                None => {
                    record.insert(key, value);
                }
                Some(existing) if *existing == value => {}
                Some(_) => {
                    record.entry(format!("{span}.{key}")).or_insert(value);
                }
            }
        }
    }
    record
}

/// RFC 3339 in UTC with microseconds, as the JSON formatter of `tracing-subscriber` wrote it.
fn timestamp() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Writes an event's fields into a JSON object: numbers and booleans as such, everything else
/// as its text (`%` fields as Display, `?` fields as Debug: call sites give Display where a
/// Debug form would leak `Some(…)` or quotes).
struct FieldsInto<'a>(&'a mut Map<String, Value>);

impl FieldsInto<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        let key = field.name();
        // An event field never hides one set before it (the record's own keys).
        let key = if self.0.contains_key(key) && key != "message" {
            format!("field.{key}")
        } else {
            key.to_owned()
        };
        self.0.insert(key, value);
    }
}

impl Visit for FieldsInto<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::String(value.to_string()), Value::Number);
        self.put(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(crate::error_chain::chain_text(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn records(emit: impl FnOnce()) -> Vec<Value> {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
            .collect()
    }

    /// The record of an event in a reconcile span whose `name` field the event has too.
    fn reconcile_record() -> Value {
        let lines = records(|| {
            let span = tracing::info_span!(
                "reconcile",
                kind = "TrustyAIService",
                namespace = "team-a",
                name = "tas"
            );
            let _entered = span.enter();
            tracing::info!(name = "tas-tls", attempt = 2_u64, ready = true, "issued");
        });
        lines[0].clone()
    }

    #[test]
    fn every_field_is_written_at_the_top_level_of_the_record() {
        let line = &reconcile_record();
        assert_eq!(line["message"], "issued");
        assert_eq!(line["span"], "reconcile");
        assert_eq!(line["kind"], "TrustyAIService");
        assert_eq!(line["namespace"], "team-a");
        assert_eq!(line["attempt"], 2);
        assert_eq!(line["ready"], true);
        assert_eq!(line["level"], "INFO");
    }

    #[test]
    fn a_span_field_whose_key_the_event_has_is_written_under_the_span_name() {
        let line = &reconcile_record();
        assert_eq!(line["name"], "tas-tls");
        assert_eq!(line["reconcile.name"], "tas");
    }

    #[test]
    fn an_error_chain_is_written_once_per_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let lines = records(|| {
            let error = Outer(std::io::Error::other("inner"));
            tracing::warn!(error = &error as &dyn std::error::Error, "failed");
        });
        assert_eq!(lines[0]["error"], "outer: inner");
    }
}
