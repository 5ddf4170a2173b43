//! Why the service's pods do not serve, as the pods' own status says it: a service container
//! that keeps exiting (with the end of its log, which the kubelet keeps as the termination
//! message under `FallbackToLogsOnError`), one that runs while its readiness check keeps
//! failing, or one that never starts because a serving certificate Secret it mounts does not
//! exist (the kubelet keeps such a pod in `ContainerCreating`; on OpenShift the service CA
//! issues those Secrets, so it names what did not happen).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::controller::children::deployment::containers::SERVICE_CONTAINER;

/// How long a running service may fail its readiness check before it is reported: it starts in
/// about 10 s, and its check is first made after 10 s.
pub const NOT_READY_GRACE: SignedDuration = SignedDuration::from_secs(60);
/// How much of the end of the service's log the status quotes.
const LAST_WORDS_LINES: usize = 3;
const LAST_WORDS_CHARS: usize = 600;

/// What keeps the service's pods from serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodProblem {
    /// The service container exited with `exit_code` (137: killed, by a failed liveness check
    /// or the memory limit, which the kubelet's `OOMKilled` names); `last_words`: the end of
    /// its log.
    Crashing {
        exit_code: i32,
        killed_for_memory: bool,
        last_words: String,
    },
    /// The service container has run for [`NOT_READY_GRACE`] and is still not ready.
    NotReady { pod: String },
    /// A pod scheduled for [`NOT_READY_GRACE`] has not started its service container, and the
    /// serving certificate Secrets `secrets` it mounts, which OpenShift's service CA issues,
    /// do not exist.
    ServingSecretMissing { pod: String, secrets: Vec<String> },
}

impl PodProblem {
    /// The condition reason and event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Crashing { .. } => trustyai_crds::contract::reason::SERVICE_CRASHING,
            Self::NotReady { .. } => trustyai_crds::contract::reason::SERVICE_NOT_READY,
            Self::ServingSecretMissing { .. } => {
                trustyai_crds::contract::reason::SERVING_SECRET_MISSING
            }
        }
    }

    /// What to tell the user.
    pub fn message(&self) -> String {
        match self {
            Self::Crashing {
                exit_code,
                killed_for_memory,
                last_words,
            } => {
                let how = match (exit_code, killed_for_memory) {
                    (_, true) => format!("was killed at its memory limit (code {exit_code})"),
                    (137, false) => {
                        "was killed (code 137: its liveness check failed while it started or ran)"
                            .to_owned()
                    }
                    (code, false) => format!("exits (code {code})"),
                };
                format!("the TrustyAI service {how}; the end of its log: {last_words}")
            }
            Self::NotReady { pod } => format!(
                "the TrustyAI service in pod {pod} runs but has failed its readiness check for more than {}s (its /q/health/ready says why; in migration mode it stays unready when its folder holds no *.hdf5 file to move)",
                NOT_READY_GRACE.as_secs()
            ),
            Self::ServingSecretMissing { pod, secrets } => format!(
                "pod {pod} has not started the TrustyAI service for more than {}s: the Secret(s) {} it mounts do not exist; OpenShift's service CA issues them for the Services annotated with service.beta.openshift.io/serving-cert-secret-name (is the service-ca operator running?)",
                NOT_READY_GRACE.as_secs(),
                secrets.join(", ")
            ),
        }
    }
}

/// The service container's status in `pod`.
fn service_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == SERVICE_CONTAINER)
}

/// The last lines of `message`, shortened.
fn last_words(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(LAST_WORDS_LINES)..].join(" | ");
    let skip = tail.chars().count().saturating_sub(LAST_WORDS_CHARS);
    tail.chars().skip(skip).collect()
}

/// Whether `pod` was scheduled more than [`NOT_READY_GRACE`] before `now` and its service
/// container has neither run nor exited since.
fn stuck_before_start(pod: &Pod, now: Timestamp) -> bool {
    let scheduled = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let created = pod.metadata.creation_timestamp.as_ref();
    let started = service_status(pod)
        .and_then(|s| s.state.as_ref())
        .is_some_and(|s| s.running.is_some() || s.terminated.is_some());
    scheduled
        && !started
        && created.is_some_and(|created| now.duration_since(created.0) > NOT_READY_GRACE)
}

/// The first problem found among `pods` (not being deleted) at `now`; `missing_secrets`: the
/// serving certificate Secrets that the service CA should have issued and that do not exist.
pub fn pod_problem(pods: &[Pod], now: Timestamp, missing_secrets: &[String]) -> Option<PodProblem> {
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    let mut not_ready = None;
    for pod in live {
        if !missing_secrets.is_empty() && stuck_before_start(pod, now) {
            not_ready = Some(PodProblem::ServingSecretMissing {
                pod: pod.metadata.name.clone().unwrap_or_default(),
                secrets: missing_secrets.to_vec(),
            });
            continue;
        }
        let Some(status) = service_status(pod) else {
            continue;
        };
        if status.ready {
            continue;
        }
        let state = status.state.as_ref();
        let exited = state
            .and_then(|s| s.terminated.as_ref())
            .or_else(|| status.last_state.as_ref()?.terminated.as_ref())
            .filter(|t| t.exit_code != 0);
        if let Some(terminated) = exited {
            return Some(PodProblem::Crashing {
                exit_code: terminated.exit_code,
                killed_for_memory: terminated.reason.as_deref() == Some("OOMKilled"),
                last_words: last_words(terminated.message.as_deref().unwrap_or_default()),
            });
        }
        let running_since = state
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref());
        if let Some(started) = running_since
            && now.duration_since(started.0) > NOT_READY_GRACE
        {
            not_ready = Some(PodProblem::NotReady {
                pod: pod.metadata.name.clone().unwrap_or_default(),
            });
        }
    }
    not_ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "tas-1"},
            "status": {"containerStatuses": [
                {"name": "kube-rbac-proxy", "ready": false, "restartCount": 0, "image": "p", "imageID": "",
                 "state": {"terminated": {"exitCode": 2}}},
                status
            ]}
        }))
        .expect("a pod")
    }

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().expect("a time")
    }

    #[test]
    fn an_exited_service_is_crashing_with_the_end_of_its_log() {
        let log = "starting\n\nconnecting to mariadb\nError: Can't connect to server on 'nowhere'\nexiting\n";
        let crashed = pod(json!({
            "name": "trustyai-service", "ready": false, "restartCount": 3, "image": "s", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "message": log}},
        }));
        assert_eq!(
            pod_problem(&[crashed], now(), &[]),
            Some(PodProblem::Crashing {
                exit_code: 1,
                killed_for_memory: false,
                last_words:
                    "connecting to mariadb | Error: Can't connect to server on 'nowhere' | exiting"
                        .into()
            })
        );
    }

    /// A pod whose service container runs, unready, since `started`.
    fn unready_since(started: &str) -> Pod {
        pod(json!({
            "name": "trustyai-service", "ready": false, "restartCount": 0, "image": "s", "imageID": "",
            "state": {"running": {"startedAt": started}},
        }))
    }

    #[test]
    fn a_service_unready_past_the_grace_is_reported() {
        assert_eq!(
            pod_problem(&[unready_since("2026-01-01T00:08:00Z")], now(), &[]),
            Some(PodProblem::NotReady {
                pod: "tas-1".into()
            })
        );
    }

    #[test]
    fn a_service_unready_within_the_grace_is_not_reported() {
        assert_eq!(
            pod_problem(&[unready_since("2026-01-01T00:09:30Z")], now(), &[]),
            None
        );
    }

    #[test]
    fn a_pod_kept_from_starting_by_missing_serving_secrets_names_them_after_the_grace() {
        let creating = |created: &str, node: Option<&str>| -> Pod {
            let mut p = pod(json!({
                "name": "trustyai-service", "ready": false, "restartCount": 0, "image": "s", "imageID": "",
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }));
            p.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    created.parse().expect("a time"),
                ));
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: node.map(str::to_owned),
                ..Default::default()
            });
            p
        };
        let missing = ["tas-tls".to_owned(), "tas-internal".to_owned()];
        let problem = pod_problem(
            &[creating("2026-01-01T00:08:00Z", Some("node"))],
            now(),
            &missing,
        );
        assert_eq!(
            problem,
            Some(PodProblem::ServingSecretMissing {
                pod: "tas-1".into(),
                secrets: missing.to_vec()
            })
        );
        let message = problem.map(|p| p.message()).unwrap_or_default();
        assert!(message.contains("tas-tls, tas-internal"), "{message}");
        // Within the grace, not scheduled (e.g. behind the single-writer gate), or with every
        // Secret there: no such problem.
        let cases = [
            (creating("2026-01-01T00:09:30Z", Some("node")), &missing[..]),
            (creating("2026-01-01T00:08:00Z", None), &missing[..]),
            (creating("2026-01-01T00:08:00Z", Some("node")), &[][..]),
        ];
        for (pod, missing) in cases {
            assert_eq!(pod_problem(&[pod], now(), missing), None);
        }
    }

    #[test]
    fn a_ready_service_or_another_containers_exit_is_no_problem() {
        let ready = pod(json!({
            "name": "trustyai-service", "ready": true, "restartCount": 1, "image": "s", "imageID": "",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "lastState": {"terminated": {"exitCode": 1}},
        }));
        assert_eq!(pod_problem(&[ready], now(), &[]), None);
    }

    #[test]
    fn a_kill_says_why_it_may_have_come() {
        let killed = |reason: &str| PodProblem::Crashing {
            exit_code: 137,
            killed_for_memory: reason == "OOMKilled",
            last_words: String::new(),
        };
        assert!(killed("Error").message().contains("liveness check failed"));
        assert!(killed("OOMKilled").message().contains("memory limit"));
    }

    #[test]
    fn long_last_words_are_cut_from_the_front() {
        let words = last_words(&"x".repeat(2000));
        assert_eq!(words.chars().count(), LAST_WORDS_CHARS);
    }
}
