//! The operator binary as a child process against the local control plane, in local mode
//! (webhooks on 127.0.0.1), stopped with SIGTERM when dropped.
//!
//! A failing test explains itself: every running operator is registered, and when a test panics
//! (an assertion, or a [`crate::support::wait`] that timed out) a panic hook prints each one's log
//! tail, the objects on its control plane and their latest events. A hook rather than `Drop`, so
//! an operator that outlives its test (the reconcile tests share one) is shown too.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use trustyai_local_cluster::ControlPlane;

use super::wait;

/// How long [`Operator::stop`] waits: the operator's own shutdown budget is 30 s, so this leaves
/// it time to exit on its own at the end of that budget on a loaded machine.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(45);
/// How long an operator dropped without [`Operator::stop`] gets to exit on SIGTERM before it is
/// killed.
const DROP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Operator {
    child: Child,
    pub webhook_port: u16,
    pub ops_port: u16,
    pub log: PathBuf,
    diagnosis: Arc<Diagnosis>,
}

/// What explains a running operator's failure: where its log is and how to read its cluster.
struct Diagnosis {
    log: PathBuf,
    namespace: String,
    /// The control plane's admin kubeconfig (the operator's own may be restricted).
    kubeconfig: PathBuf,
}

/// Every running operator of this test binary.
static RUNNING: Mutex<Vec<Arc<Diagnosis>>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<Arc<Diagnosis>>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many lines of an operator's log a failure shows.
const LOG_TAIL: usize = 60;
/// How many of the latest events a failure shows.
const EVENT_TAIL: usize = 40;

/// The last `lines` lines of the file at `path`.
fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// kubectl's answer (or why there is none) for `args` against `kubeconfig`.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    match Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg(trustyai_local_cluster::kubectl_cache_dir(kubeconfig))
        // A failure's report must not hang on an API server that is gone.
        .arg("--request-timeout=10s")
        .args(args)
        .output()
    {
        Ok(out) => format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => format!("(kubectl {args:?} could not run: {e})"),
    }
}

impl Diagnosis {
    fn report(&self, why: &str) {
        let objects = kubectl(
            &self.kubeconfig,
            &[
                "get",
                "trustyaiservices,deployments,pods,services,persistentvolumeclaims,leases",
                "--all-namespaces",
                "-o",
                "wide",
            ],
        );
        let events = kubectl(
            &self.kubeconfig,
            &[
                "get",
                "events",
                "--all-namespaces",
                "--sort-by=.lastTimestamp",
            ],
        );
        let events: Vec<&str> = events.lines().collect();
        eprintln!(
            "==== {why}: the operator of namespace {ns} ====\n\
             -- its log ({log}, last {LOG_TAIL} lines) --\n{log_tail}\n\
             -- the objects --\n{objects}\n\
             -- the latest events --\n{events}\n\
             ==== end of the operator of namespace {ns} ====",
            ns = self.namespace,
            log = self.log.display(),
            log_tail = tail(&self.log, LOG_TAIL),
            events = events[events.len().saturating_sub(EVENT_TAIL)..].join("\n"),
        );
    }
}

/// From the first operator started on: a panic anywhere (an assertion in any test, also one
/// beside an operator that outlives its test) first prints what explains it, then panics as
/// before.
fn report_on_panic() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            report_running_operators("a test panicked");
        }));
    });
}

/// Prints what explains a failure for every running operator: `why` names the failure.
fn report_running_operators(why: &str) {
    let running: Vec<Arc<Diagnosis>> = running().clone();
    for diagnosis in running {
        diagnosis.report(why);
    }
}

/// A free loopback port that no outgoing connection can take meanwhile
/// (`trustyai_local_cluster::free_port`).
pub fn free_port() -> u16 {
    trustyai_local_cluster::free_port().unwrap_or_else(|e| panic!("{e}"))
}

/// A plain HTTP/1.1 GET on 127.0.0.1; returns the status code and body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_accepting(port, path, None).map(|(code, _, body)| (code, body))
}

/// [`http_get`] with an optional `Accept` header; also returns the `Content-Type`.
pub fn http_get_accepting(
    port: u16,
    path: &str,
    accept: Option<&str>,
) -> Option<(u16, Option<String>, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{accept}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let content_type = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-type")
            .then(|| value.trim().to_owned())
    });
    Some((code, content_type, body.to_string()))
}

/// An operator about to start: its namespace and flags, and what may be chosen beyond them
/// (ports a restarted replica keeps, a kubeconfig that impersonates a ServiceAccount or points at
/// a front for the API server). [`Operator::start`] is the usual case.
pub struct Launch<'a> {
    cp: &'a ControlPlane,
    namespace: &'a str,
    extra: &'a [&'a str],
    webhook_port: Option<u16>,
    ops_port: Option<u16>,
    kubeconfig: Option<&'a std::path::Path>,
}

impl<'a> Launch<'a> {
    /// The webhook port (default: a free one).
    pub fn webhook_port(mut self, port: u16) -> Self {
        self.webhook_port = Some(port);
        self
    }

    /// The ops port (default: a free one).
    pub fn ops_port(mut self, port: u16) -> Self {
        self.ops_port = Some(port);
        self
    }

    /// The kubeconfig (default: the control plane's admin one).
    pub fn kubeconfig(mut self, kubeconfig: &'a std::path::Path) -> Self {
        self.kubeconfig = Some(kubeconfig);
        self
    }

    /// Starts the binary.
    pub fn start(self) -> Operator {
        Operator::spawn(
            self.cp,
            self.namespace,
            self.webhook_port.unwrap_or_else(free_port),
            self.ops_port.unwrap_or_else(free_port),
            self.kubeconfig.unwrap_or(&self.cp.kubeconfig),
            self.extra,
        )
    }
}

impl Operator {
    /// Starts the operator with its namespace `namespace` and the given extra flags.
    pub fn start(cp: &ControlPlane, namespace: &str, extra: &[&str]) -> Operator {
        Self::launch(cp, namespace, extra).start()
    }

    /// As [`Operator::start`], with ports or a kubeconfig to choose before [`Launch::start`].
    pub fn launch<'a>(
        cp: &'a ControlPlane,
        namespace: &'a str,
        extra: &'a [&'a str],
    ) -> Launch<'a> {
        Launch {
            cp,
            namespace,
            extra,
            webhook_port: None,
            ops_port: None,
            kubeconfig: None,
        }
    }

    fn spawn(
        cp: &ControlPlane,
        namespace: &str,
        webhook_port: u16,
        ops_port: u16,
        kubeconfig: &std::path::Path,
        extra: &[&str],
    ) -> Operator {
        // Unique per start: a restarted replica on the same port keeps its predecessor's log.
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let log = cp
            .dir
            .join("logs")
            .join(format!("operator-{namespace}-{webhook_port}-{started}.log"));
        let file = std::fs::File::create(&log).expect("operator log");
        let child = Command::new(env!("CARGO_BIN_EXE_trustyai-operator"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .args([
                "--local-webhook-address",
                &format!("127.0.0.1:{webhook_port}"),
            ])
            .args(["--ops-address", &format!("127.0.0.1:{ops_port}")])
            .args(extra)
            .env("RUST_LOG", "info,trustyai=debug")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("the operator binary starts");
        let diagnosis = Arc::new(Diagnosis {
            log: log.clone(),
            namespace: namespace.to_owned(),
            kubeconfig: cp.kubeconfig.clone(),
        });
        report_on_panic();
        running().push(diagnosis.clone());
        Operator {
            child,
            webhook_port,
            ops_port,
            log,
            diagnosis,
        }
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let ready = wait::blocking_within(timeout, || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the operator exited ({status}) before it was ready:\n{}",
                    self.logs()
                );
            }
            matches!(http_get(self.ops_port, "/readyz"), Some((200, _))).then_some(())
        });
        if ready.is_none() {
            panic!(
                "the operator was not ready within {timeout:?}:\n{}",
                self.logs()
            );
        }
    }

    pub fn logs(&self) -> String {
        tail(&self.log, LOG_TAIL)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM without waiting (a second one, as from [`Operator::stop`], is harmless).
    pub fn signal_term(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// [`Operator::stop`], asserting a clean exit (showing the log otherwise): how a test ends
    /// the operator it ran, since an exit on SIGTERM that is not a success is a bug too.
    pub fn stop_cleanly(&mut self) {
        let status = self.stop();
        assert!(status.success(), "clean exit on SIGTERM:\n{}", self.logs());
    }

    /// SIGTERM, then waits up to [`STOP_TIMEOUT`] for the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal_term();
        let exited = wait::blocking_within(STOP_TIMEOUT, || self.child.try_wait().ok().flatten());
        if let Some(status) = exited {
            // Stopped: a later failure's report is about the operators still running.
            running().retain(|d| !Arc::ptr_eq(d, &self.diagnosis));
            return status;
        }
        let _ = self.child.kill();
        panic!(
            "the operator did not stop within {STOP_TIMEOUT:?} of SIGTERM:\n{}",
            self.logs()
        );
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        running().retain(|d| !Arc::ptr_eq(d, &self.diagnosis));
        if self.is_running() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            let exited = wait::blocking_within(DROP_TIMEOUT, || (!self.is_running()).then_some(()));
            if exited.is_some() {
                return;
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
