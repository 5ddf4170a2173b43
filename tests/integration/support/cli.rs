//! Runs the operator binary's offline subcommands (`convert`, `validate`) as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `trustyai-operator <subcommand> <args>`, feeding `stdin` when given, with `env` set
/// and the variables in `env_remove` removed; waits for it to end.
pub fn run(
    subcommand: &str,
    args: &[&str],
    stdin: Option<&str>,
    env: &[(&str, &str)],
    env_remove: &[&str],
) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trustyai-operator"));
    command.arg(subcommand).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    for key in env_remove {
        command.env_remove(key);
    }
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).expect("stdin");
    }
    child.wait_with_output().expect("the binary ends")
}
