//! Leader election on a `coordination.k8s.io/v1` Lease in the operator namespace. Only the
//! holder reconciles (and migrates storage); every replica serves the webhooks all the time.
//!
//! The rules that keep two reconcilers from ever overlapping:
//! - another replica takes the lease only after it has seen the lease unchanged for a whole
//!   `lease_duration`, measured on its own clock from when it saw the last change (clocks of
//!   different nodes are never compared);
//! - the holder stops leading (and its reconciles are stopped) when it has not renewed for
//!   `renew_deadline`, which is shorter than `lease_duration`; so it has stopped before anyone
//!   may take over;
//! - on shutdown the holder releases the lease (empty holder), so a standby takes over at once
//!   instead of waiting for it to expire.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Timing and identity of one elector.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Lease name, in `namespace`.
    pub lease_name: String,
    /// The operator namespace.
    pub namespace: String,
    /// This replica's identity (the pod name, plus a random suffix).
    pub identity: String,
    /// How long a lease is valid after its last renewal (default 15 s).
    pub lease_duration: Duration,
    /// The holder gives up leading when it could not renew for this long (default 10 s).
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew (default 2 s).
    pub retry_period: Duration,
}

/// Errors that end the election loop.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("invalid leader-election timing: {0}")]
    Timing(String),
}

impl LeaderConfig {
    /// Checks `retry_period < renew_deadline < lease_duration`.
    pub fn validate(&self) -> Result<(), LeaderError> {
        if !(self.retry_period < self.renew_deadline && self.renew_deadline < self.lease_duration) {
            return Err(LeaderError::Timing(format!(
                "need retry period ({:?}) < renew deadline ({:?}) < lease duration ({:?})",
                self.retry_period, self.renew_deadline, self.lease_duration
            )));
        }
        Ok(())
    }
}

/// What the lease looks like to this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    holder: Option<String>,
    /// The lease's resourceVersion: any renewal changes it.
    version: String,
}

/// The decision on one look at the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseAction {
    /// Nobody may take it yet (held by another, seen changing within `lease_duration`).
    Wait,
    /// Take it (free, released, or not renewed for `lease_duration`).
    Acquire,
    /// We hold it: renew.
    Renew,
}

fn next_action(
    observed: &Observed,
    me: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> LeaseAction {
    match observed.holder.as_deref() {
        Some(holder) if holder == me => LeaseAction::Renew,
        None | Some("") => LeaseAction::Acquire,
        Some(_) if unchanged_for >= lease_duration => LeaseAction::Acquire,
        Some(_) => LeaseAction::Wait,
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Runs the election until `stop` is cancelled, publishing `true` while this replica leads and
/// `false` otherwise, and releases the lease on the way out if it holds it.
pub async fn run(
    client: Client,
    config: LeaderConfig,
    leading: watch::Sender<bool>,
    stop: CancellationToken,
) -> Result<(), LeaderError> {
    config.validate()?;
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let span = tracing::info_span!("leader_election", lease = %config.lease_name, identity = %config.identity);
    elect(api, config, leading, stop).instrument(span).await;
    Ok(())
}

async fn elect(
    api: Api<Lease>,
    config: LeaderConfig,
    leading: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let mut last_seen: Option<(Observed, Instant)> = None;
    let mut last_renewed: Option<Instant> = None;
    // The lease as this replica last wrote it, while it leads: renewing it needs no read.
    let mut held: Option<Lease> = None;
    loop {
        let was_leading = *leading.borrow();
        if was_leading && last_renewed.is_some_and(|t| t.elapsed() >= config.renew_deadline) {
            tracing::warn!(deadline = ?config.renew_deadline, "could not renew the lease in time; no longer leading");
            leading.send_replace(false);
            last_renewed = None;
        }
        let budget = attempt_budget(*leading.borrow(), last_renewed, &config);
        // A renewal counts from when it was sent, not answered: the write may have happened
        // anywhere in between, and others time the lease from when they see it change.
        let sent = Instant::now();
        if was_leading {
            tracing::debug!("renewing the lease");
        } else {
            held = None;
        }
        let outcome =
            tokio::time::timeout(budget, attempt(&api, &config, &mut last_seen, &mut held)).await;
        match outcome
            .unwrap_or_else(|_| Err(kube::Error::Service("lease request timed out".into())))
        {
            Ok(true) => {
                last_renewed = Some(sent);
                if !was_leading {
                    tracing::info!("became the leader");
                    leading.send_replace(true);
                }
            }
            Ok(false) => {
                if *leading.borrow() {
                    tracing::warn!("the lease is held by another replica; no longer leading");
                    leading.send_replace(false);
                    last_renewed = None;
                }
            }
            Err(e) => {
                tracing::debug!(error = %crate::error_chain::Chain(&e), "lease attempt failed; retrying")
            }
        }
        // A holder wakes up at its renew deadline at the latest, so it stops leading by then
        // and not up to a retry period later.
        let pause =
            config
                .retry_period
                .min(attempt_budget(*leading.borrow(), last_renewed, &config));
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(pause) => {}
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        release(&api, &config).await;
    }
}

/// How long one look at the lease may take. The holder may wait for a slow API server up to
/// what is left of its renew deadline (a busy but answering server must not cost it the lease,
/// as a fixed `retry_period` cap would), and never past it, so a hanging server cannot keep it
/// "leading". A candidate gets the whole renew deadline: a late answer only delays its turn.
fn attempt_budget(leading: bool, last_renewed: Option<Instant>, config: &LeaderConfig) -> Duration {
    match last_renewed {
        Some(renewed) if leading => config.renew_deadline.saturating_sub(renewed.elapsed()),
        _ => config.renew_deadline,
    }
}

/// One look at the lease: acquire or renew it if allowed. `Ok(true)` while we hold it.
///
/// `held` is the lease as this replica last wrote it (taken, and set again on each
/// successful write). It is renewed without reading it first; if someone else wrote the
/// lease since, the write is a conflict and the lease is read and judged as usual.
async fn attempt(
    api: &Api<Lease>,
    config: &LeaderConfig,
    last_seen: &mut Option<(Observed, Instant)>,
    held: &mut Option<Lease>,
) -> Result<bool, kube::Error> {
    if let Some(mut lease) = held.take() {
        let previous = lease.spec.take();
        lease.spec = Some(held_spec(config, previous.as_ref()));
        match api
            .replace(&config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                *held = Some(written);
                return Ok(true);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::debug!("the lease changed since this replica wrote it; reading it");
            }
            Err(e) => return Err(e),
        }
    }
    let Some(mut lease) = api.get_opt(&config.lease_name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.lease_name.clone()),
                ..Default::default()
            },
            spec: Some(held_spec(config, None)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                *held = Some(written);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let observed = Observed {
        holder: lease.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
    };
    let since = match last_seen {
        Some((seen, at)) if *seen == observed => *at,
        _ => Instant::now(),
    };
    *last_seen = Some((observed.clone(), since));
    match next_action(
        &observed,
        &config.identity,
        since.elapsed(),
        config.lease_duration,
    ) {
        LeaseAction::Wait => Ok(false),
        step => {
            let transitions = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_transitions)
                .unwrap_or(0);
            let previous = lease.spec.take();
            let mut spec = held_spec(config, previous.as_ref());
            if step == LeaseAction::Acquire {
                spec.lease_transitions = Some(transitions + 1);
                spec.acquire_time = Some(now());
            }
            lease.spec = Some(spec);
            // Replace carries the resourceVersion we read: a concurrent writer makes this a
            // conflict instead of two holders.
            match api
                .replace(&config.lease_name, &PostParams::default(), &lease)
                .await
            {
                Ok(written) => {
                    *held = Some(written);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

fn held_spec(config: &LeaderConfig, previous: Option<&LeaseSpec>) -> LeaseSpec {
    let seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(seconds),
        acquire_time: previous
            .and_then(|p| p.acquire_time.clone())
            .or_else(|| Some(now())),
        renew_time: Some(now()),
        lease_transitions: previous.and_then(|p| p.lease_transitions).or(Some(0)),
        ..LeaseSpec::default()
    }
}

/// Gives the lease up (empty holder) so a standby takes over without waiting for expiry.
async fn release(api: &Api<Lease>, config: &LeaderConfig) {
    let result = async {
        let mut lease = api.get(&config.lease_name).await?;
        if lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            != Some(config.identity.as_str())
        {
            return Ok(());
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now());
        }
        api.replace(&config.lease_name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
    .await;
    match result {
        Ok(()) => tracing::info!("released the lease"),
        Err(e) => {
            tracing::warn!(error = %crate::error_chain::Chain(&e), "could not release the lease; a standby takes over when it expires")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(holder: Option<&str>) -> Observed {
        Observed {
            holder: holder.map(String::from),
            version: "1".into(),
        }
    }

    const LEASE: Duration = Duration::from_secs(15);

    fn timing() -> LeaderConfig {
        LeaderConfig {
            lease_name: "lease".into(),
            namespace: "ns".into(),
            identity: "me".into(),
            lease_duration: LEASE,
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    #[test]
    fn a_holder_waits_for_a_slow_answer_only_until_its_renew_deadline() {
        let config = timing();
        let renewed = Instant::now() - Duration::from_secs(7);
        let budget = attempt_budget(true, Some(renewed), &config);
        assert!(budget <= Duration::from_secs(3), "{budget:?}");
        assert!(budget > config.retry_period, "{budget:?}");
        let long_ago = Instant::now() - Duration::from_secs(11);
        assert_eq!(
            attempt_budget(true, Some(long_ago), &config),
            Duration::ZERO
        );
        assert_eq!(attempt_budget(false, None, &config), config.renew_deadline);
        assert_eq!(
            attempt_budget(false, Some(renewed), &config),
            config.renew_deadline
        );
    }

    #[test]
    fn a_free_or_released_lease_is_taken() {
        assert_eq!(
            next_action(&observed(None), "me", Duration::ZERO, LEASE),
            LeaseAction::Acquire
        );
        assert_eq!(
            next_action(&observed(Some("")), "me", Duration::ZERO, LEASE),
            LeaseAction::Acquire
        );
    }

    #[test]
    fn our_lease_is_renewed() {
        assert_eq!(
            next_action(&observed(Some("me")), "me", Duration::from_secs(100), LEASE),
            LeaseAction::Renew
        );
    }

    #[test]
    fn another_holder_is_waited_for_until_unchanged_for_a_whole_lease() {
        assert_eq!(
            next_action(
                &observed(Some("other")),
                "me",
                Duration::from_secs(14),
                LEASE
            ),
            LeaseAction::Wait
        );
        assert_eq!(
            next_action(&observed(Some("other")), "me", LEASE, LEASE),
            LeaseAction::Acquire
        );
    }

    const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease";

    fn held_by(holder: &str, version: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "lease", "namespace": "ns", "resourceVersion": version},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
        })
    }

    #[tokio::test]
    async fn the_holder_renews_without_reading_the_lease_first() {
        use crate::controller::mock_api::{Expected, MockApi};
        use http::Method;
        let (mock, client) = MockApi::new([
            Expected::get_absent(LEASE_PATH),
            Expected::write(
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            ),
            Expected::write(Method::PUT, LEASE_PATH),
            Expected::write(Method::PUT, LEASE_PATH),
        ]);
        let api: Api<Lease> = Api::namespaced(client, "ns");
        let config = timing();
        let (mut seen, mut held) = (None, None);
        for _ in 0..3 {
            assert!(matches!(
                attempt(&api, &config, &mut seen, &mut held).await,
                Ok(true)
            ));
        }
        let renewals: Vec<_> = mock.requests().into_iter().skip(2).collect();
        assert!(
            renewals.iter().all(|r| r.method == Method::PUT),
            "{renewals:?}"
        );
        let version = |r: &crate::controller::mock_api::Recorded| {
            r.body
                .as_ref()
                .map(|b| b["metadata"]["resourceVersion"].clone())
        };
        // Each renewal carries the version the previous write returned.
        assert_ne!(version(&renewals[0]), version(&renewals[1]));
        assert_eq!(
            renewals[1]
                .body
                .as_ref()
                .map(|b| b["spec"]["holderIdentity"].clone()),
            Some(serde_json::json!("me"))
        );
    }

    #[tokio::test]
    async fn a_renewal_conflict_is_settled_by_rereading_the_lease() {
        use crate::controller::mock_api::{Expected, MockApi, failure};
        use http::Method;
        let (_mock, client) = MockApi::new([
            Expected::answer(
                Method::PUT,
                LEASE_PATH,
                409,
                failure(409, "Conflict", "changed"),
            ),
            Expected::get(LEASE_PATH, held_by("someone-else", "9")),
        ]);
        let api: Api<Lease> = Api::namespaced(client, "ns");
        let config = timing();
        let mut held = serde_json::from_value::<Lease>(held_by("me", "3")).ok();
        let mut seen = None;
        let outcome = attempt(&api, &config, &mut seen, &mut held).await;
        assert!(matches!(outcome, Ok(false)), "{outcome:?}");
        assert!(held.is_none(), "the next attempt reads again");
    }

    #[test]
    fn the_renew_deadline_must_be_shorter_than_the_lease() {
        let ok = timing();
        assert!(ok.validate().is_ok());
        let bad = LeaderConfig {
            renew_deadline: Duration::from_secs(15),
            ..ok
        };
        assert!(bad.validate().is_err());
    }
}
