//! The supervisor of a running operator's long-lived tasks.
//!
//! Every task runs until the stop token is cancelled (a signal, or a task failing). Before the
//! stop, a task that ends is a failure. During the stop, a task that ends is stopping, unless it
//! ends with an error the stop did not cause: [`TaskError::is_caused_by_stop`] is the one list of
//! the errors a stop causes by itself. So a graceful stop exits 0 whatever each task was doing
//! when the signal came, and a real failure while stopping still exits non-zero.
//!
//! The ops tasks (health, readiness, metrics) are stopped last, after every other task, so
//! probes see "draining" rather than a refused connection while the HTTPS server drains.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::leader_duties::LeadingError;

/// How long the tasks other than the ops tasks have, together, to stop after the stop token.
pub const STOP_BUDGET: Duration = Duration::from_secs(30);
/// How long the ops tasks have to stop once every other task has.
pub const OPS_STOP_BUDGET: Duration = Duration::from_secs(5);

/// The supervised tasks of a running operator, by the name logs and errors give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    ProbeServer,
    OpsServer,
    CertificateLoader,
    ProcessWatches,
    WebhookServer,
    CaBundlePublisher,
    LeaderElection,
    ReconcileLoop,
    CertificateMaintenance,
    CertificateFiles,
    ClientCaFile,
}

impl Task {
    /// The name in log lines (`task` field) and errors.
    pub const fn name(self) -> &'static str {
        match self {
            Task::ProbeServer => "probe server",
            Task::OpsServer => "ops server",
            Task::CertificateLoader => "certificate loader",
            Task::ProcessWatches => "process watches",
            Task::WebhookServer => "webhook server",
            Task::CaBundlePublisher => "caBundle publisher",
            Task::LeaderElection => "leader election",
            Task::ReconcileLoop => "reconcile loop",
            Task::CertificateMaintenance => "certificate maintenance",
            Task::CertificateFiles => "certificate files",
            Task::ClientCaFile => "client CA file",
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a supervised task ended while the process was meant to keep running.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("the server failed")]
    Server(#[source] trustyai_webhooks::ServerError),
    #[error("the election loop failed")]
    Leader(#[source] crate::leader_election::LeaderError),
    #[error("the leader's duties failed")]
    Leading(#[source] LeadingError),
    #[error("maintaining the certificate Secret failed")]
    Certificates(#[source] Box<trustyai_certs::StoreError>),
    /// What feeds the task (a channel or a watch) closed.
    #[error("its input stopped")]
    InputStopped,
    /// The task returned although it runs until the stop.
    #[error("it ended unexpectedly")]
    EndedUnexpectedly,
    #[error("it panicked: {0}")]
    Panicked(String),
    /// The task was still running when the stop budget ran out, and was aborted.
    #[error("it did not stop within {0:?} of the stop request")]
    DidNotStop(Duration),
}

impl TaskError {
    /// Whether the stop itself causes this error, so that it is no failure once the stop token
    /// is cancelled. This is the one list of such errors:
    /// - an input (a channel, a watch) that closed: the task feeding it stopped first;
    /// - a task that ended on its own: its work honours the stop token too, and saw it first;
    ///
    /// Everything else (a server that could not serve, a certificate that could not be kept, a
    /// reconcile loop that failed, a task that did not stop in time) is a failure also while
    /// stopping.
    pub fn is_caused_by_stop(&self) -> bool {
        match self {
            TaskError::InputStopped | TaskError::EndedUnexpectedly => true,
            TaskError::Server(_)
            | TaskError::Panicked(_)
            | TaskError::Leader(_)
            | TaskError::Leading(_)
            | TaskError::Certificates(_)
            | TaskError::DidNotStop(_) => false,
        }
    }
}

/// A task that failed, and why.
#[derive(Debug, thiserror::Error)]
#[error("task {task} failed")]
pub struct TaskFailure {
    pub task: Task,
    #[source]
    pub source: TaskError,
}

/// The running tasks: the work, and the ops tasks stopped after it.
#[derive(Default)]
pub struct Tasks {
    work: Group,
    ops: Group,
}

/// Tasks that end with their name and result: a panic is caught in the task and becomes its
/// result, so the only join error left is an abort, and the names of the aborted tasks are
/// those still in `running`.
#[derive(Default)]
struct Group {
    set: JoinSet<(Task, Result<(), TaskError>)>,
    running: HashMap<Id, Task>,
}

impl Group {
    fn spawn(
        &mut self,
        task: Task,
        future: impl Future<Output = Result<(), TaskError>> + Send + 'static,
    ) {
        let caught = AssertUnwindSafe(future).catch_unwind().map(move |ended| {
            let result =
                ended.unwrap_or_else(|panic| Err(TaskError::Panicked(panic_text(&*panic))));
            (task, result)
        });
        let handle = self.set.spawn(caught);
        self.running.insert(handle.id(), task);
    }

    /// The next task to end, with its result; `None` when none is left or only aborted ones.
    async fn next(&mut self) -> Option<(Task, Result<(), TaskError>)> {
        loop {
            match self.set.join_next_with_id().await? {
                Ok((id, ended)) => {
                    self.running.remove(&id);
                    return Some(ended);
                }
                // Aborted: reported by `stop_within`, which aborts.
                Err(_) => continue,
            }
        }
    }

    /// Waits up to `budget` for every task to end, recording each; aborts what is left.
    async fn stop_within(&mut self, budget: Duration, outcome: &mut Outcome) {
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            match tokio::time::timeout_at(deadline, self.next()).await {
                Ok(Some((task, result))) => outcome.stopping(task, result),
                Ok(None) => return,
                Err(_) => break,
            }
        }
        self.set.abort_all();
        while let Some((task, result)) = self.next().await {
            // Ended between the deadline and the abort.
            outcome.stopping(task, result);
        }
        for (_, task) in self.running.drain() {
            outcome.stopping(task, Err(TaskError::DidNotStop(budget)));
        }
    }
}

/// A panic's message, where it is text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

impl Tasks {
    /// Runs `future` as `task` until the stop.
    pub fn spawn(
        &mut self,
        task: Task,
        future: impl Future<Output = Result<(), TaskError>> + Send + 'static,
    ) {
        self.work.spawn(task, future);
    }

    /// Runs `future` as `task` until the ops stop token, which the supervisor cancels once every
    /// other task has stopped.
    pub fn spawn_ops(
        &mut self,
        task: Task,
        future: impl Future<Output = Result<(), TaskError>> + Send + 'static,
    ) {
        self.ops.spawn(task, future);
    }
}

/// What the supervisor saw: the first failure, if any.
#[derive(Default)]
struct Outcome {
    failure: Option<TaskFailure>,
}

impl Outcome {
    /// A task ended before the stop: whatever the result, the process cannot go on as it was.
    fn ended_early(&mut self, task: Task, result: Result<(), TaskError>) {
        let source = result.err().unwrap_or(TaskError::EndedUnexpectedly);
        tracing::error!(
            task = task.name(),
            error = &source as &dyn std::error::Error,
            "task failed; shutting down"
        );
        self.fail(task, source);
    }

    /// A task ended after the stop: it stopped, unless its error is one the stop does not cause.
    fn stopping(&mut self, task: Task, result: Result<(), TaskError>) {
        match result {
            Ok(()) => tracing::info!(task = task.name(), "stopped"),
            Err(error) if error.is_caused_by_stop() => {
                tracing::info!(task = task.name(), reason = %crate::error_chain::Chain(&error), "stopped")
            }
            Err(error) => {
                tracing::error!(
                    task = task.name(),
                    error = &error as &dyn std::error::Error,
                    "failed while stopping"
                );
                self.fail(task, error);
            }
        }
    }

    fn fail(&mut self, task: Task, source: TaskError) {
        if self.failure.is_none() {
            self.failure = Some(TaskFailure { task, source });
        }
    }
}

/// Runs `work`, which runs until the stop, until `stop`: `Ok` at the stop, and the error
/// `ended` makes of its output if it ends first. The stop is looked at first, so work that
/// ends because it saw the stop too is never mistaken for a failure.
pub async fn until_stop<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
    ended: impl FnOnce(T) -> TaskError,
) -> Result<(), TaskError> {
    tokio::select! {
        biased;
        () = stop.cancelled() => Ok(()),
        output = work => if stop.is_cancelled() { Ok(()) } else { Err(ended(output)) },
    }
}

/// Waits for `stop` (cancelled by a signal) or the first task to end (which cancels it), then
/// stops the work tasks within [`STOP_BUDGET`], then the ops tasks (through `ops_stop`) within
/// [`OPS_STOP_BUDGET`]. `Ok` when nothing failed; the first failure otherwise.
pub async fn supervise(
    mut tasks: Tasks,
    stop: CancellationToken,
    ops_stop: CancellationToken,
) -> Result<(), TaskFailure> {
    let mut outcome = Outcome::default();
    tokio::select! {
        biased;
        () = stop.cancelled() => {}
        Some((task, result)) = tasks.work.next() => {
            // A task that ends because the stop reached it before the supervisor noticed is
            // stopping, not failing.
            if stop.is_cancelled() {
                outcome.stopping(task, result);
            } else {
                outcome.ended_early(task, result);
            }
        }
        Some((task, result)) = tasks.ops.next() => outcome.ended_early(task, result),
    }
    stop.cancel();
    tracing::info!(
        tasks = tasks.work.set.len() + tasks.ops.set.len(),
        "stopping"
    );
    tasks.work.stop_within(STOP_BUDGET, &mut outcome).await;
    ops_stop.cancel();
    tasks.ops.stop_within(OPS_STOP_BUDGET, &mut outcome).await;
    match outcome.failure {
        Some(failure) => Err(failure),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until(
        stop: &CancellationToken,
        then: Result<(), TaskError>,
    ) -> impl Future<Output = Result<(), TaskError>> + Send + 'static {
        let stop = stop.clone();
        async move {
            stop.cancelled().await;
            then
        }
    }

    fn ops(
        ops_stop: &CancellationToken,
    ) -> impl Future<Output = Result<(), TaskError>> + Send + 'static {
        until(ops_stop, Ok(()))
    }

    /// Supervises `tasks` beside an ops server that runs until `ops_stop`.
    async fn supervised(
        mut tasks: Tasks,
        stop: &CancellationToken,
        ops_stop: &CancellationToken,
    ) -> Result<(), TaskFailure> {
        tasks.spawn_ops(Task::OpsServer, ops(ops_stop));
        supervise(tasks, stop.clone(), ops_stop.clone()).await
    }

    /// [`supervised`], the stop requested before the tasks run.
    async fn stopped(
        tasks: Tasks,
        stop: &CancellationToken,
        ops_stop: &CancellationToken,
    ) -> Result<(), TaskFailure> {
        stop.cancel();
        supervised(tasks, stop, ops_stop).await
    }

    /// The stop, the ops server's stop, and no task yet.
    fn fixture() -> (CancellationToken, CancellationToken, Tasks) {
        (
            CancellationToken::new(),
            CancellationToken::new(),
            Tasks::default(),
        )
    }

    /// Asserts that `failure` is `task`'s and that `source` holds for its error.
    #[track_caller]
    fn assert_failure(failure: &TaskFailure, task: Task, source: impl Fn(&TaskError) -> bool) {
        assert_eq!(failure.task, task);
        assert!(source(&failure.source), "{:?}", failure.source);
    }

    fn server_error() -> TaskError {
        TaskError::Server(trustyai_webhooks::ServerError::Ops(std::io::Error::other(
            "accept failed",
        )))
    }

    #[tokio::test]
    async fn errors_the_stop_causes_are_no_failure() {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(
            Task::ProcessWatches,
            until(&stop, Err(TaskError::EndedUnexpectedly)),
        );
        tasks.spawn(
            Task::CertificateLoader,
            until(&stop, Err(TaskError::InputStopped)),
        );
        tasks.spawn(Task::LeaderElection, until(&stop, Ok(())));
        assert!(stopped(tasks, &stop, &ops_stop).await.is_ok());
    }

    #[tokio::test]
    async fn an_error_the_stop_does_not_cause_fails_the_stop() {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(Task::WebhookServer, until(&stop, Err(server_error())));
        tasks.spawn(
            Task::ReconcileLoop,
            until(
                &stop,
                Err(TaskError::Leading(LeadingError::ElectionStopped)),
            ),
        );
        let failure = stopped(tasks, &stop, &ops_stop).await.unwrap_err();
        assert_failure(&failure, Task::WebhookServer, |e| {
            matches!(e, TaskError::Server(_))
        });
    }

    /// Supervises a task that ends before the stop beside one that runs until it; returns the
    /// stop, the ops server's stop and the outcome.
    async fn one_task_ends_before_the_stop() -> (
        CancellationToken,
        CancellationToken,
        Result<(), TaskFailure>,
    ) {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(Task::CaBundlePublisher, async {
            Err(TaskError::InputStopped)
        });
        tasks.spawn(Task::ProcessWatches, until(&stop, Ok(())));
        let outcome = supervised(tasks, &stop, &ops_stop).await;
        (stop, ops_stop, outcome)
    }

    #[tokio::test]
    async fn a_task_ending_before_the_stop_fails_the_supervision() {
        let (_stop, _ops_stop, outcome) = one_task_ends_before_the_stop().await;
        let failure = outcome.unwrap_err();
        assert_eq!(failure.task, Task::CaBundlePublisher);
    }

    #[tokio::test]
    async fn a_task_ending_before_the_stop_stops_the_others() {
        let (stop, ops_stop, _outcome) = one_task_ends_before_the_stop().await;
        assert!(stop.is_cancelled() && ops_stop.is_cancelled());
    }

    #[tokio::test]
    async fn a_task_that_ends_cleanly_before_the_stop_is_a_failure_too() {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(Task::LeaderElection, async { Ok(()) });
        let failure = supervised(tasks, &stop, &ops_stop).await.unwrap_err();
        assert!(matches!(failure.source, TaskError::EndedUnexpectedly));
    }

    #[tokio::test]
    async fn a_panic_is_its_tasks_failure() {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(Task::CertificateMaintenance, async { panic!("boom") });
        let failure = supervised(tasks, &stop, &ops_stop).await.unwrap_err();
        assert_failure(&failure, Task::CertificateMaintenance, |e| {
            !e.is_caused_by_stop()
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_does_not_stop_within_the_budget_fails_as_did_not_stop() {
        let (stop, ops_stop, mut tasks) = fixture();
        tasks.spawn(Task::ReconcileLoop, std::future::pending());
        let failure = stopped(tasks, &stop, &ops_stop).await.unwrap_err();
        let did_not_stop = |e: &TaskError| matches!(e, TaskError::DidNotStop(STOP_BUDGET));
        assert_failure(&failure, Task::ReconcileLoop, did_not_stop);
    }

    #[tokio::test]
    async fn the_ops_tasks_stop_only_after_the_work() {
        let (stop, ops_stop, mut tasks) = fixture();
        let seen_ops_stop = ops_stop.clone();
        tasks.spawn(Task::WebhookServer, {
            let stop = stop.clone();
            async move {
                stop.cancelled().await;
                tokio::task::yield_now().await;
                if seen_ops_stop.is_cancelled() {
                    Err(server_error())
                } else {
                    Ok(())
                }
            }
        });
        assert!(stopped(tasks, &stop, &ops_stop).await.is_ok());
    }
}
