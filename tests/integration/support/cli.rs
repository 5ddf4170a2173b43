//! Runs the operator binary's subcommands as a user would: the offline ones (`convert`,
//! `validate`) and those an admin runs against a cluster (`uninstall`, `migrate-storage`).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use trustyai_local_cluster::ControlPlane;

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

/// Runs `trustyai-operator <subcommand> --kubeconfig <the control plane's> <args>` with `env` set,
/// as an admin would against the cluster; waits for it to end.
pub fn run_against(
    cp: &ControlPlane,
    subcommand: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let kubeconfig = cp.kubeconfig.to_str().expect("a UTF-8 kubeconfig path");
    let mut all = vec!["--kubeconfig", kubeconfig];
    all.extend_from_slice(args);
    run(subcommand, &all, None, env, &[])
}

/// Asserts that `output` is a success (showing what it printed otherwise); returns its stdout.
pub fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
