//! `trustyai-operator validate` as a user runs it: the binary, fixture files under
//! `tests/fixtures/validate/`, stdin, exit statuses and the exact lines printed. No cluster.

use crate::support;

use std::path::PathBuf;

/// What one run printed and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/validate")
        .join(name)
        .display()
        .to_string()
}

/// Runs `validate` with `args`, feeding `stdin` if given. The environment's
/// ALLOWED_IMAGE_PREFIXES is removed so the default prefix applies unless a test sets one.
fn validate(args: &[&str], stdin: Option<&str>) -> Run {
    let out = support::cli::run(
        "validate",
        args,
        stdin,
        &[("RUST_LOG", "warn")],
        &["ALLOWED_IMAGE_PREFIXES"],
    );
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn valid_files_exit_zero_with_a_line_per_document() {
    let run = validate(&["-f", &fixture("valid.yaml")], None);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr),
        [
            "document 1 (team-a/monitor): valid",
            "document 2 (v1 ConfigMap team-a/settings): skipped: not a trustyai.opendatahub.io TrustyAIService",
            "document 3 (team-a/monitor-db): valid",
            "2 TrustyAIServices checked: 2 valid, 0 invalid; 1 other document skipped",
        ]
    );
    assert_eq!(run.stdout, "", "nothing on stdout without --show-defaults");
}

#[test]
fn invalid_files_exit_one_with_a_line_per_violation() {
    let run = validate(&["-f", &fixture("invalid.yaml")], None);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr),
        [
            "document 1 (team-a/fine): valid",
            r#"document 2 (team-a/bad): spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
            r#"document 2 (team-a/bad): spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
            r#"document 2 (team-a/bad): spec.image: Invalid value: "docker.io/someone/trustyai:1": must start with one of the allowed image prefixes: "quay.io/trustyai/""#,
            "2 TrustyAIServices checked: 1 valid, 1 invalid",
        ]
    );
}

#[test]
fn allowed_image_prefixes_come_from_the_flag_or_the_environment() {
    let file = fixture("custom-image.json");
    let run = validate(&["-f", &file], None);
    assert_eq!(
        run.code,
        Some(1),
        "JSON input, default prefix: {}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("document 1 (team-b/custom): spec.image: Invalid value")
    );

    let run = validate(
        &[
            "-f",
            &file,
            "--allowed-image-prefixes",
            "quay.io/trustyai/,registry.example.com/trustyai/",
        ],
        None,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let out = support::cli::run(
        "validate",
        &["-f", &file],
        None,
        &[("ALLOWED_IMAGE_PREFIXES", "registry.example.com/")],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unreadable_input_exits_two() {
    let missing = fixture("does-not-exist.yaml");
    let run = validate(&["-f", &missing], None);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .starts_with(&format!("error: cannot read {missing}: ")),
        "{}",
        run.stderr
    );

    let run = validate(&["-f", &fixture("broken.yaml")], None);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("broken.yaml: document 2: not valid YAML or JSON"),
        "{}",
        run.stderr
    );

    let run = validate(
        &[
            "-f",
            &fixture("valid.yaml"),
            "--old",
            &fixture("broken.yaml"),
        ],
        None,
    );
    assert_eq!(run.code, Some(2), "an unreadable --old: {}", run.stderr);

    let run = validate(&["-f", "-", "--old", "-"], Some(""));
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("cannot both read stdin"),
        "{}",
        run.stderr
    );
}

#[test]
fn old_objects_give_update_semantics() {
    let stored = fixture("stored.yaml");
    // Without --old the same document is a CREATE, where any size goes.
    let run = validate(&["-f", &fixture("shrink.yaml")], None);
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let run = validate(&["-f", &fixture("shrink.yaml"), "--old", &stored], None);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr),
        [
            r#"document 1 (team-a/monitor): spec.storage.size: Invalid value: "1Gi": may not be smaller than the current "2Gi": a PersistentVolumeClaim can grow but not shrink"#,
            "1 TrustyAIService checked: 0 valid, 1 invalid",
        ]
    );

    let run = validate(&["-f", &fixture("grow.yaml"), "--old", &stored], None);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr)[0],
        "document 1 (team-a/monitor): valid as an update of --old document 1 item 1"
    );

    // --old from stdin works too.
    let text = std::fs::read_to_string(&stored).expect("fixture");
    let run = validate(&["-f", &fixture("shrink.yaml"), "--old", "-"], Some(&text));
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("spec.storage.size"), "{}", run.stderr);
}

#[test]
fn show_defaults_prints_the_defaulted_object_on_stdout() {
    let run = validate(&["-f", &fixture("minimal.yaml"), "--show-defaults"], None);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let expected =
        std::fs::read_to_string(fixture("minimal.defaulted.yaml")).expect("expected output");
    assert_eq!(run.stdout, expected);
    assert_eq!(
        lines(&run.stderr),
        [
            "document 1 (minimal): valid",
            "1 TrustyAIService checked: 1 valid, 0 invalid"
        ],
        "diagnostics stay off stdout, so the YAML can be piped"
    );
}

/// `validate --show-defaults` on the fixture of v1alpha1 documents.
fn validate_v1alpha1_showing_defaults() -> Run {
    validate(&["-f", &fixture("v1alpha1.yaml"), "--show-defaults"], None)
}

#[test]
fn v1alpha1_documents_are_validated_as_converted_to_v1() {
    let run = validate_v1alpha1_showing_defaults();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr),
        [
            "document 1 (trustyai-service): valid",
            r#"document 2 (old-style): spec.data.format: Unsupported value: "JSON": supported values: "CSV""#,
            r#"document 2 (old-style): spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#,
            "document 2 (old-style): spec.metrics.batchSize: Invalid value: 0: must be at least 1",
            "2 TrustyAIServices checked: 1 valid, 1 invalid",
        ]
    );
}

#[test]
fn v1alpha1_documents_are_shown_defaulted_as_stored_in_v1() {
    let run = validate_v1alpha1_showing_defaults();
    // The defaults are shown as the object is stored: in v1, with the v1-only retention.
    let shown: Vec<serde_json::Value> =
        trustyai_crds::manifests::parse_documents(&run.stdout).expect("YAML on stdout");
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[0]["apiVersion"], "trustyai.opendatahub.io/v1");
    assert_eq!(shown[0]["spec"]["storage"]["retention"], "Retain");
    assert_eq!(shown[0]["spec"]["replicas"], 1);
    assert_eq!(shown[0]["spec"]["metrics"]["batchSize"], 5000);
}

#[test]
fn stdin_is_read_for_dash() {
    let invalid = std::fs::read_to_string(fixture("invalid.yaml")).expect("fixture");
    let run = validate(&["-f", "-"], Some(&invalid));
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("document 2 (team-a/bad): spec.metrics.schedule: Invalid value"),
        "{}",
        run.stderr
    );

    let valid = std::fs::read_to_string(fixture("valid.yaml")).expect("fixture");
    let run = validate(&["--filename", "-"], Some(&valid));
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let run = validate(&["-f", "-"], Some(""));
    assert_eq!(run.code, Some(0), "empty input: nothing invalid");
    assert_eq!(
        run.stderr.trim(),
        "0 TrustyAIServices checked: 0 valid, 0 invalid"
    );
}

#[test]
fn warnings_are_printed_without_failing_the_run() {
    let run = validate(&["-f", &fixture("warnings.yaml")], None);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "document 1 (busy): warning: spec.replicas: 3 replicas run as one pod while the data is on a claim"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn metrics_are_judged_as_the_webhooks_judge_them() {
    let run = validate(&["-f", &fixture("metrics.yaml"), "--show-defaults"], None);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        lines(&run.stderr),
        [
            "document 1 (team-a/demo-model-spd): valid",
            "document 2 (team-a/demo-model-drift): valid",
            r#"document 2 (team-a/demo-model-drift): warning: spec.type: "meanshift" is a deprecated name of the metric type "comparemeans"; replaced with "comparemeans""#,
            "document 3 (team-a/broken): spec.batchSize: Invalid value: 0: must be at least 1",
            "document 3 (team-a/broken): spec.privilegedValue: Required value: fairness metrics need the privileged group's value",
            "document 3 (team-a/broken): spec.unprivilegedValue: Required value: fairness metrics need the unprivileged group's value",
            "document 3 (team-a/broken): spec.outcomeName: Required value: fairness metrics need the output the groups are compared on",
            "document 3 (team-a/broken): spec.favorableOutcome: Required value: fairness metrics need the favourable outcome's value",
            "0 TrustyAIServices checked: 0 valid, 0 invalid; 3 TrustyAIMetrics checked: 2 valid, 1 invalid",
        ]
    );
    // The defaulted objects carry the current name, as the mutating webhook stores it.
    assert!(run.stdout.contains("type: comparemeans"), "{}", run.stdout);
    assert!(!run.stdout.contains("meanshift"), "{}", run.stdout);
}
