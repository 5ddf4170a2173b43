//! Which service processes a metric must be registered with, kept in, or forgotten: pure, from
//! what the cluster says about the service's pods and what the metric's status recorded.
//!
//! The service keeps scheduled metrics in the memory of one process, so a registration belongs
//! to a process: a pod (by uid) and its service container's start (a container restart in the
//! same pod is a new, empty process). A restart, rollout or migration is noticed from the pods,
//! never by asking the service what it still holds.

use trustyai_crds::metric::types::Registration;

/// One process of the service, as the cluster shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// The pod.
    pub pod: String,
    /// The pod's uid.
    pub pod_uid: String,
    /// When its service container started (`state.running.startedAt`).
    pub started_at: String,
    /// Where its API listens (`<pod IP>:<port>`).
    pub address: String,
}

impl Process {
    fn runs(&self, record: &Registration) -> bool {
        self.pod_uid == record.pod_uid && self.started_at == record.started_at
    }
}

/// What to do for one metric.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Ready processes without the metric: register it.
    pub register: Vec<Process>,
    /// Ready processes holding an older generation of it: remove that request, register anew.
    pub replace: Vec<(Process, Registration)>,
    /// Registrations that stand.
    pub keep: Vec<Registration>,
    /// Registrations whose process is gone (the pod deleted, or its container restarted): the
    /// request died with it.
    pub forget: Vec<Registration>,
}

/// The plan for a metric of `generation`: `ready` are the processes the service's endpoints
/// route to, `running` every process of the service's pods that runs now (ready or not), and
/// `records` the registrations the status holds.
pub fn plan(
    generation: i64,
    ready: &[Process],
    running: &[Process],
    records: &[Registration],
) -> Plan {
    let mut out = Plan::default();
    for record in records {
        let alive = running.iter().chain(ready).any(|p| p.runs(record));
        let in_ready = ready.iter().find(|p| p.runs(record));
        match in_ready {
            Some(process) if record.generation != generation => {
                out.replace.push((process.clone(), record.clone()));
            }
            Some(_) => out.keep.push(record.clone()),
            // Not routed to now (a readiness blip) but running: its schedule still holds the
            // request, and registering again when it is back would make a duplicate.
            None if alive => out.keep.push(record.clone()),
            None => out.forget.push(record.clone()),
        }
    }
    for process in ready {
        if !records.iter().any(|r| process.runs(r)) {
            out.register.push(process.clone());
        }
    }
    out
}

/// Whether every ready process holds the metric at `generation` once `plan` is carried out
/// with no failures: the records after it are `keep` plus one per registered or replaced
/// process.
pub fn covers(ready: &[Process], records: &[Registration], generation: i64) -> bool {
    ready.iter().all(|p| {
        records
            .iter()
            .any(|r| p.runs(r) && r.generation == generation)
    })
}

/// The request ids in a process's scrape that carry the metric's `request_name` but are not
/// `keep`: duplicates (a registration whose record was lost), which the operator removes.
pub fn strays<'a>(
    request_name: &str,
    keep: Option<&str>,
    seen: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    let mut out: Vec<String> = seen
        .into_iter()
        .filter(|(id, name)| *name == Some(request_name) && Some(*id) != keep)
        .map(|(id, _)| id.to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pod: &str, started: &str) -> Process {
        Process {
            pod: pod.into(),
            pod_uid: format!("uid-{pod}"),
            started_at: started.into(),
            address: format!("10.0.0.{}:4443", pod.len()),
        }
    }

    fn record(pod: &str, started: &str, id: &str, generation: i64) -> Registration {
        Registration {
            pod: pod.into(),
            pod_uid: format!("uid-{pod}"),
            started_at: started.into(),
            request_id: id.into(),
            generation,
        }
    }

    #[test]
    fn a_new_metric_is_registered_with_every_ready_process() {
        let ready = [process("a", "t1"), process("b", "t1")];
        let plan = plan(1, &ready, &ready, &[]);
        assert_eq!(plan.register, ready);
        assert!(plan.keep.is_empty() && plan.forget.is_empty() && plan.replace.is_empty());
    }

    #[test]
    fn a_registered_metric_is_left_alone() {
        let ready = [process("a", "t1")];
        let records = [record("a", "t1", "r1", 1)];
        let plan = plan(1, &ready, &ready, &records);
        assert_eq!(plan.keep, records);
        assert!(plan.register.is_empty());
        assert!(covers(&ready, &plan.keep, 1));
    }

    #[test]
    fn a_replaced_pod_is_a_new_process() {
        assert_registered_anew(process("b", "t2"));
    }

    #[test]
    fn a_restarted_container_is_a_new_process() {
        assert_registered_anew(process("a", "t2"));
    }

    /// `now`, the one ready process, gets the metric and the record of pod `a`'s process
    /// started at `t1` is forgotten.
    fn assert_registered_anew(now: Process) {
        let ready = [now];
        let records = [record("a", "t1", "r1", 1)];
        let plan = plan(1, &ready, &ready, &records);
        assert_eq!(plan.register, ready);
        assert_eq!(plan.forget, records);
    }

    #[test]
    fn a_running_pod_out_of_the_endpoints_keeps_its_request() {
        let running = [process("a", "t1")];
        let records = [record("a", "t1", "r1", 1)];
        let plan = plan(1, &[], &running, &records);
        assert_eq!(plan.keep, records);
        assert!(plan.forget.is_empty() && plan.register.is_empty());
    }

    #[test]
    fn a_changed_spec_replaces_the_request() {
        let ready = [process("a", "t1")];
        let records = [record("a", "t1", "r1", 1)];
        let plan = plan(2, &ready, &ready, &records);
        assert_eq!(plan.replace, vec![(ready[0].clone(), records[0].clone())]);
        assert!(plan.register.is_empty() && plan.keep.is_empty());
        assert!(!covers(&ready, &records, 2));
    }

    #[test]
    fn strays_are_our_names_with_other_ids() {
        let seen = [
            ("r1", Some("ns/m")),
            ("r2", Some("ns/m")),
            ("r2", Some("ns/m")),
            ("r3", Some("ns/other")),
            ("r4", None),
        ];
        assert_eq!(strays("ns/m", Some("r1"), seen), vec!["r2".to_owned()]);
        assert_eq!(
            strays("ns/m", None, seen),
            vec!["r1".to_owned(), "r2".to_owned()]
        );
    }
}
