//! `convert` on a generated corpus of TrustyAIServices whose strings and keys are what YAML
//! readers get wrong: YAML 1.1 booleans, numbers, timestamps and merge keys, U+0085, U+2028,
//! U+2029, keys of 1,024 characters and more, leading and trailing spaces, quotes, `#`, `: `,
//! other unicode. The YAML that `convert` writes is read back by kubectl (required on `PATH`;
//! `kubectl patch --local` decodes files as `kubectl create -f` does, without a cluster), and
//! what kubectl reads must be exactly what the JSON run of the same conversion gives.

use crate::support;
use support::temp::TempDir;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Map, Value, json};
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION;
use trustyai_crds::manifests::{TextFormat, parse_documents, render_documents};

/// Strings that some YAML reader takes for something else, or that need escapes or quotes.
const TRICKY: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "N",
    "Yes",
    "NO",
    "On",
    "OFF",
    "true",
    "False",
    "TRUE",
    "null",
    "Null",
    "~",
    "",
    "<<",
    "=",
    "1:20",
    "190:20:30.15",
    "2025-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "1_000",
    "NaN",
    ".nan",
    ".inf",
    "-.Inf",
    "+.INF",
    "1e3",
    "1E+3",
    "0o17",
    "0x1F",
    "017",
    "09",
    "+12",
    "-0",
    "1.5",
    ".5",
    "5.",
    "0b101",
    " lead",
    "trail ",
    " both ",
    "\u{85}",
    "a\u{85}b",
    "x \u{2028}y",
    "\u{2029}",
    "\u{2028}\u{2029}",
    "\u{feff}bom",
    "日本語",
    "中文 テスト",
    "😀",
    "👩\u{200d}💻",
    "e\u{301}",
    "a\u{a0}b",
    "a: b",
    "a #b",
    "#x",
    "a#b",
    "\"q\"",
    "'s'",
    "it's",
    "back\\slash",
    "\\",
    "tab\there",
    "new\nline",
    "\r\n",
    "trailing\n",
    "- item",
    "-",
    "? q",
    "?",
    ": c",
    ":",
    "a:",
    "[x]",
    "{y}",
    "a, b",
    "&a",
    "*a",
    "!tag",
    "!!str",
    "|",
    ">",
    "%YAML",
    "@",
    "`",
    ",",
    "---",
    "...",
    "--- x",
    "\u{0}\u{1}\u{7f}\u{9f}",
    "\u{1b}[0m",
    "k8s.io/enabled",
    "plain text",
    "5s",
    "v1",
    "{\"json\": [1, \"two\"]}",
];

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn tricky(&mut self) -> &'static str {
        TRICKY[self.below(TRICKY.len())]
    }

    /// A tricky string alone half the time (so `yes` is tested as the whole scalar), else two
    /// or three of them joined.
    fn string(&mut self) -> String {
        match self.below(4) {
            0 | 1 => self.tricky().to_owned(),
            2 => format!("{}{}", self.tricky(), self.tricky()),
            _ => format!("{} {}{}", self.tricky(), self.tricky(), self.tricky()),
        }
    }

    /// A key of 1,024 characters or more, made of tricky strings.
    fn long_key(&mut self) -> String {
        let mut key = format!("example.com/{}", self.string());
        while key.chars().count() < 1024 + self.below(600) {
            key.push_str(self.tricky());
        }
        key
    }

    fn scalar(&mut self) -> Value {
        match self.below(8) {
            0 => json!(self.next() as i64 >> self.below(60)),
            1 => json!((self.below(100_000) as f64) + 0.5),
            2 => json!(self.below(2) == 0),
            3 => Value::Null,
            _ => json!(self.string()),
        }
    }

    fn map(&mut self, depth: usize) -> Value {
        let mut map = Map::new();
        for _ in 0..1 + self.below(5) {
            map.insert(self.string(), self.value(depth + 1));
        }
        if self.below(3) == 0 {
            map.insert(self.long_key(), self.value(depth + 1));
        }
        Value::Object(map)
    }

    fn value(&mut self, depth: usize) -> Value {
        match (depth < 3).then(|| self.below(6)) {
            Some(0) => self.map(depth),
            Some(1) => Value::Array((0..self.below(4)).map(|_| self.value(depth + 1)).collect()),
            Some(2) => Value::Object(Map::new()),
            _ => self.scalar(),
        }
    }

    fn strings(&mut self, n: usize) -> Map<String, Value> {
        let mut map = Map::new();
        for _ in 0..n {
            map.insert(self.string(), json!(self.string()));
        }
        map.insert(self.long_key(), json!(self.string()));
        map
    }
}

/// v1alpha1 TrustyAIServices with tricky annotations and labels, and tricky content in the
/// places conversion carries unknown fields through (spec, status).
fn corpus() -> Vec<Value> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..40)
        .map(|i| {
            json!({
                "apiVersion": "trustyai.opendatahub.io/v1alpha1",
                "kind": "TrustyAIService",
                "metadata": {
                    "name": format!("corpus-{i}"),
                    "namespace": "team-yaml",
                    "labels": rng.strings(3),
                    "annotations": rng.strings(6),
                },
                "spec": {
                    "storage": {"format": "PVC", "folder": "/inputs", "size": "1Gi"},
                    "data": {"filename": rng.string(), "format": "CSV"},
                    "metrics": {"schedule": "5s"},
                    "extra": rng.map(0),
                    "list": [rng.value(1), rng.string(), [rng.string(), rng.map(1)]],
                },
                "status": {
                    "phase": rng.string(),
                    "conditions": [{"type": "Ready", "status": "True", "reason": rng.string(),
                                    "message": rng.string()}],
                    "extra": rng.map(0),
                },
            })
        })
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

fn succeeded(output: &Output, what: &str) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what} failed: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn convert_file(path: &Path) -> String {
    let output = support::cli::run(
        "convert",
        &["--to", "v1", "-f", path.to_str().expect("path")],
        None,
        &[],
        &[],
    );
    succeeded(&output, "convert")
}

/// The objects in `text` (concatenated JSON objects, or `List`s of them).
fn objects(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let value = value.expect("kubectl prints JSON");
        match value.get("items").and_then(Value::as_array) {
            Some(items) if value["kind"] == "List" => out.extend(items.iter().cloned()),
            _ => out.push(value),
        }
    }
    out
}

/// What kubectl reads from the YAML file at `path`, its cache in `dir`. Panics when kubectl is
/// missing: this test is the proof that kubectl agrees, and is never skipped.
fn kubectl_reads(dir: &TempDir, path: &Path) -> Vec<Value> {
    let output = Command::new("kubectl")
        .args([
            "patch", "--local", "--type", "merge", "-p", "{}", "-o", "json", "-f",
        ])
        .arg(path)
        // Not ~/.kube/cache.
        .arg(format!(
            "--cache-dir={}",
            dir.join("kubectl-cache").display()
        ))
        // No cluster is needed, and none may be reached by accident.
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .output()
        .unwrap_or_else(|e| panic!("kubectl must be on PATH to run this test: {e}"));
    objects(&succeeded(&output, "kubectl patch --local"))
}

/// Where the first difference between `a` and `b` is, for a readable failure.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, value) in x {
                let Some(other) = y.get(key) else {
                    return Some(format!("{at}: key {key:?} missing on the right"));
                };
                if let Some(d) = first_difference(value, other, &format!("{at}/{key:?}")) {
                    return Some(d);
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{at}: key {k:?} missing on the left"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}/{i}"))),
        _ => (a != b).then(|| format!("{at}: {a:?} != {b:?}")),
    }
}

fn assert_same(left: &[Value], right: &[Value], what: &str) {
    assert_eq!(left.len(), right.len(), "{what}: number of objects");
    for (i, (l, r)) in left.iter().zip(right).enumerate() {
        if let Some(difference) = first_difference(l, r, "") {
            panic!("{what}: object {i} differs at {difference}");
        }
    }
}

#[test]
fn yaml_written_for_the_corpus_reads_back_identically() {
    let corpus = corpus();
    let yaml = render_documents(&corpus, TextFormat::Yaml).expect("renders");
    assert_same(
        &parse_documents(&yaml).expect("our YAML parses"),
        &corpus,
        "round trip",
    );
}

#[test]
fn kubectl_reads_the_yaml_written_for_the_corpus_identically() {
    let corpus = corpus();
    let yaml = render_documents(&corpus, TextFormat::Yaml).expect("renders");
    let dir = TempDir::new("yaml-corpus");
    let file = dir.join("corpus-v1alpha1.yaml");
    std::fs::write(&file, &yaml).expect("write");
    assert_same(
        &kubectl_reads(&dir, &file),
        &corpus,
        "kubectl reading our YAML",
    );
}

/// How the corpus is given to `convert`.
enum Input {
    /// One JSON `List`.
    JsonList,
    /// JSON objects one after the other.
    JsonStream,
    /// YAML documents.
    Yaml,
}

/// What `convert --to v1` prints for the corpus written as `input` to the file `name` of `dir`.
fn converted(dir: &TempDir, input: Input, name: &str) -> String {
    let corpus = corpus();
    let text = match input {
        Input::JsonList => {
            let list = json!({"apiVersion": "v1", "kind": "List", "items": corpus});
            serde_json::to_string_pretty(&list).expect("JSON")
        }
        Input::JsonStream => corpus
            .iter()
            .map(|o| serde_json::to_string(o).expect("JSON"))
            .collect::<Vec<String>>()
            .join("\n"),
        Input::Yaml => render_documents(&corpus, TextFormat::Yaml).expect("renders"),
    };
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write");
    convert_file(&file)
}

/// JSON in, JSON out, the reference of the tests below: every string byte for byte, the
/// v1-only fields kept in the annotation.
#[test]
fn the_corpus_converted_from_json_keeps_every_string() {
    let corpus = corpus();
    let dir = TempDir::new("yaml-corpus");
    let converted = objects(&converted(&dir, Input::JsonList, "corpus.json"));
    assert_eq!(converted.len(), corpus.len());
    for (before, after) in corpus.iter().zip(&converted) {
        assert_eq!(after["apiVersion"], "trustyai.opendatahub.io/v1");
        let mut annotations = after["metadata"]["annotations"].clone();
        if let Some(map) = annotations.as_object_mut() {
            map.shift_remove(CONVERSION_PRESERVED_ANNOTATION);
        }
        // Strings byte for byte: JSON values compare strings by their bytes.
        assert_eq!(annotations, before["metadata"]["annotations"]);
        for pointer in [
            "/metadata/labels",
            "/spec/extra",
            "/spec/list",
            "/spec/data",
            "/status/phase",
            "/status/extra",
        ] {
            assert_eq!(after.pointer(pointer), before.pointer(pointer), "{pointer}");
        }
    }
}

/// The same objects as a JSON stream, one after the other, give the same.
#[test]
fn the_corpus_as_a_json_stream_converts_as_the_json_list_does() {
    let dir = TempDir::new("yaml-corpus");
    assert_same(
        &objects(&converted(&dir, Input::JsonStream, "corpus-stream.json")),
        &objects(&converted(
            &dir,
            Input::JsonList,
            "corpus-stream-reference.json",
        )),
        "JSON stream",
    );
}

/// YAML in, YAML out: the same objects as JSON in, JSON out, read here.
#[test]
fn the_corpus_in_yaml_converts_as_in_json() {
    let dir = TempDir::new("yaml-corpus");
    assert_same(
        &parse_documents(&converted(&dir, Input::Yaml, "corpus.yaml")).expect("the output parses"),
        &objects(&converted(
            &dir,
            Input::JsonList,
            "corpus-yaml-reference.json",
        )),
        "YAML output read here",
    );
}

/// YAML in, YAML out: kubectl reads the same objects as JSON in, JSON out.
#[test]
fn kubectl_reads_the_corpus_converted_in_yaml_as_in_json() {
    let dir = TempDir::new("yaml-corpus");
    let yaml_out_file = dir.join("corpus-v1.yaml");
    std::fs::write(
        &yaml_out_file,
        converted(&dir, Input::Yaml, "corpus-kubectl.yaml"),
    )
    .expect("write");
    assert_same(
        &kubectl_reads(&dir, &yaml_out_file),
        &objects(&converted(
            &dir,
            Input::JsonList,
            "corpus-kubectl-reference.json",
        )),
        "YAML output read by kubectl",
    );
}

#[test]
fn each_tricky_string_alone_reads_back_in_kubectl_as_written() {
    // The findings of the issue, one by one: what `convert` writes for them is what kubectl
    // reads back.
    let annotations: Map<String, Value> = TRICKY
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("example.com/a{i}"), json!(s)))
        .chain(TRICKY.iter().map(|s| ((*s).to_owned(), json!("key"))))
        .collect();
    let object = json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService",
        "metadata": {"name": "each", "annotations": annotations},
        "spec": {"values": TRICKY},
    });
    let dir = TempDir::new("yaml-corpus");
    let file = dir.join("each.json");
    std::fs::write(&file, serde_json::to_string(&object).expect("JSON")).expect("write");
    let converted = objects(&convert_file(&file));
    let yaml_in = dir.join("each.yaml");
    std::fs::write(
        &yaml_in,
        render_documents(&[object], TextFormat::Yaml).expect("renders"),
    )
    .expect("write");
    let yaml_out = dir.join("each-v1.yaml");
    std::fs::write(&yaml_out, convert_file(&yaml_in)).expect("write");
    assert_same(&kubectl_reads(&dir, &yaml_out), &converted, "kubectl");
}
