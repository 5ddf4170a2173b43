//! The renewal decision: given what the Secret holds and the time, what (if anything) to
//! regenerate. Pure: no I/O, no clock, no key generation.
//!
//! - The CA is rotated as [`crate::rotation`] says, the Secret holding the previous CA in
//!   `ca-previous.crt` during a rotation. The serving certificate is the one certificate that
//!   moves onto the new CA:
//!   1. at the rotation, it stays (signed by the old CA); the published bundle holds both CAs.
//!   2. once the new CA has been out for [`Lifetimes::overlap`], a serving certificate signed by
//!      it replaces the old one.
//!   3. once that certificate has been out for the overlap too, `ca-previous.crt` goes.
//! - The serving certificate is renewed at two thirds of its lifetime, and at once when it is
//!   unusable, expired, lacks a required name, or does not chain to the current CA. Whatever is
//!   issued is signed by the current CA, a repair before step 2 too.

use std::fmt;

use time::OffsetDateTime;

use crate::lifetimes::Lifetimes;
use crate::material::{CaCert, CertInfo, MaterialError};
use crate::names::ServiceNames;
use crate::rotation::{self, CaPlan, CaReason, CaStep, Rotation};
use crate::secret_layout::{CA_CRT, CA_PREVIOUS_CRT, PreviousCa, StoredState, TLS_CRT};
use crate::verify::verify_chain;

/// Why a step is taken; logged, and the [`Reason::is_warning`] ones become Warning events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The Secret holds no material yet.
    Empty,
    /// A step of the CA's rotation, or the CA's replacement.
    Ca(CaReason),
    /// The serving certificate or key is missing, garbage, mismatched, or outside its validity.
    ServingUnusable(MaterialError),
    /// The serving certificate reached two thirds of its lifetime.
    ServingDue {
        /// When it became due.
        renew_at: OffsetDateTime,
    },
    /// The serving certificate lacks names the Service is reached by.
    ServingMissingNames(Vec<String>),
    /// The serving certificate chains to no CA held in the Secret.
    ServingUntrusted(MaterialError),
    /// CA rotation step 2: the new CA has been published long enough; move the serving
    /// certificate onto it.
    ServingOnPreviousCa,
}

impl Reason {
    /// Whether this reason means something was broken (worth a Warning event), as opposed to
    /// routine renewal.
    pub fn is_warning(&self) -> bool {
        match self {
            Self::Ca(reason) => reason.is_warning(),
            Self::ServingUnusable(_) | Self::ServingUntrusted(_) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(
                f,
                "the Secret holds no certificate material yet; generating it"
            ),
            Self::Ca(CaReason::Unusable(e)) => {
                write!(f, "the CA is unusable ({e}); generating a new CA")
            }
            Self::Ca(CaReason::Due { renew_at }) => {
                write!(
                    f,
                    "the CA reached two thirds of its lifetime at {renew_at}; rotating it"
                )
            }
            Self::Ca(CaReason::PreviousUnusable(e)) => {
                write!(f, "{CA_PREVIOUS_CRT} is unusable ({e}); removing it")
            }
            Self::Ca(CaReason::PreviousExpired) => {
                write!(f, "{CA_PREVIOUS_CRT} has expired; removing it")
            }
            Self::Ca(CaReason::RotationComplete) => write!(
                f,
                "CA rotation complete: the serving certificate chains to the new CA; removing {CA_PREVIOUS_CRT}"
            ),
            Self::ServingUnusable(e) => write!(
                f,
                "the serving certificate is unusable ({e}); issuing a new one"
            ),
            Self::ServingDue { renew_at } => write!(
                f,
                "the serving certificate reached two thirds of its lifetime at {renew_at}; renewing it"
            ),
            Self::ServingMissingNames(names) => write!(
                f,
                "the serving certificate does not cover {}; issuing a new one",
                names.join(", ")
            ),
            Self::ServingUntrusted(e) => write!(
                f,
                "the serving certificate chains to no CA in the Secret ({e}); issuing a new one"
            ),
            Self::ServingOnPreviousCa => write!(
                f,
                "the new CA has been published long enough; moving the serving certificate onto it"
            ),
        }
    }
}

/// What to do to the Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenewalPlan {
    /// What happens to the CAs (`ca.crt`, `ca.key` and `ca-previous.crt`).
    pub ca: CaStep,
    /// Issue a new serving certificate (signed by the CA the plan ends with).
    pub issue_serving: bool,
    /// Why, in the order found.
    pub reasons: Vec<Reason>,
    /// When to decide again if nothing changes meanwhile; `None` for a plan that changes
    /// something (decide again after writing it).
    pub recheck_at: Option<OffsetDateTime>,
}

impl RenewalPlan {
    /// A plan for an empty Secret: everything new.
    pub fn fresh() -> Self {
        Self {
            ca: CaStep::Replace,
            issue_serving: true,
            reasons: Vec::new(),
            recheck_at: None,
        }
    }

    /// Whether the plan changes nothing.
    pub fn is_noop(&self) -> bool {
        self.ca == CaStep::Keep && !self.issue_serving
    }

    /// The reasons that deserve a Warning event.
    pub fn warnings(&self) -> impl Iterator<Item = &Reason> {
        self.reasons.iter().filter(|r| r.is_warning())
    }

    #[cfg(test)]
    fn keep() -> Self {
        Self {
            ca: CaStep::Keep,
            issue_serving: false,
            reasons: Vec::new(),
            recheck_at: None,
        }
    }
}

/// The CA a serving chain verifies against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signer {
    /// The current CA.
    Current,
    /// The previous CA, kept during a rotation.
    Previous,
}

/// Which CA the serving chain `chain` (leaf first) verifies against at `now`: `current`, else
/// `previous` (during a rotation). A chain on neither gets `current`'s error, as that is the CA
/// it should be on.
pub(crate) fn signer_of(
    chain: &[CertInfo],
    current: &CertInfo,
    previous: Option<&CertInfo>,
    now: OffsetDateTime,
) -> Result<Signer, MaterialError> {
    let verify = |ca: &CertInfo, ca_what: &str| {
        verify_chain(TLS_CRT, chain, ca_what, std::slice::from_ref(ca), now)
    };
    match verify(current, CA_CRT) {
        Ok(()) => Ok(Signer::Current),
        Err(_) if previous.is_some_and(|p| verify(p, CA_PREVIOUS_CRT).is_ok()) => {
            Ok(Signer::Previous)
        }
        Err(untrusted) => Err(untrusted),
    }
}

/// Decides what to regenerate. See the module documentation for the rules.
pub fn plan_renewal(
    state: &StoredState,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> RenewalPlan {
    let previous = state.previous_ca.as_ref().map(Result::as_ref);
    let mut rotation = match rotation::plan(state.ca.as_ref(), previous, lifetimes, now) {
        CaPlan::Usable(rotation) => rotation,
        CaPlan::Replace(unusable) => {
            let reason = if state.is_empty() {
                Reason::Empty
            } else {
                Reason::Ca(CaReason::Unusable(unusable))
            };
            return RenewalPlan {
                reasons: vec![reason],
                ..RenewalPlan::fresh()
            };
        }
    };
    let mut serving_recheck_at = None;
    let serving = judge_serving(state, names, &mut rotation, &mut serving_recheck_at, now);

    let ca = rotation.step();
    let recheck_at = match (rotation.recheck_at, serving_recheck_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut reasons: Vec<Reason> = rotation.reasons.into_iter().map(Reason::Ca).collect();
    let issue_serving = serving.is_some();
    reasons.extend(serving);
    let changes = ca != CaStep::Keep || issue_serving;
    RenewalPlan {
        ca,
        issue_serving,
        reasons,
        recheck_at: if changes { None } else { recheck_at },
    }
}

/// Why the serving certificate must be issued, if it must; otherwise the earliest time it may
/// have to be goes into `recheck_at`, and a rotation in progress learns when the certificate
/// moved onto the current CA (step 3).
fn judge_serving(
    state: &StoredState,
    names: &ServiceNames,
    rotation: &mut Rotation<'_, CaCert, PreviousCa>,
    recheck_at: &mut Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Option<Reason> {
    let serving = match &state.serving {
        Ok(serving) => serving,
        Err(e) => return Some(Reason::ServingUnusable(e.clone())),
    };
    let leaf = serving.leaf();
    if let Err(e) = leaf.check_time(TLS_CRT, now) {
        return Some(Reason::ServingUnusable(e));
    }
    let missing = names.missing_from(leaf);
    if !missing.is_empty() {
        return Some(Reason::ServingMissingNames(missing));
    }
    let mut recheck = |at: OffsetDateTime| {
        *recheck_at = Some(recheck_at.map_or(at, |current| current.min(at)));
    };
    let previous = rotation.previous.map(PreviousCa::cert);
    match signer_of(serving.chain(), rotation.current.cert(), previous, now) {
        // Step 1: the leaf stays on what becomes the previous CA.
        Ok(Signer::Current) if rotation.step() == CaStep::Rotate => None,
        Ok(Signer::Current) => {
            let renew_at = leaf.renew_at();
            if now >= renew_at {
                return Some(Reason::ServingDue { renew_at });
            }
            recheck(renew_at);
            let moved_at = rotation.timetable.issued_at(leaf);
            rotation.retire_once_settled(moved_at, now);
            None
        }
        Ok(Signer::Previous) => {
            let move_at = rotation.timetable.move_at;
            if now >= move_at {
                return Some(Reason::ServingOnPreviousCa);
            }
            recheck(move_at);
            None
        }
        Err(untrusted) => Some(Reason::ServingUntrusted(untrusted)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bundle::Bundle;
    use crate::lifetimes::Lifetimes;
    use crate::secret_layout::{CA_KEY, SecretData, TLS_KEY, apply_plan};
    use crate::testutil::{data, days, lifetimes, names, set, t0, text};
    use crate::verify::chains_to;

    fn decide_at(data: &SecretData, now: OffsetDateTime) -> RenewalPlan {
        plan_renewal(&StoredState::from_data(data), &names(), &lifetimes(), now)
    }

    /// The plan at t0 for fresh material whose `key` holds `value` instead.
    fn decided_with(key: &str, value: &str) -> RenewalPlan {
        let mut d = data(t0());
        set(&mut d, key, value);
        decide_at(&d, t0())
    }

    /// Asserts what `plan` does to the CAs, whether it issues a serving certificate, and how
    /// many warnings it gives.
    #[track_caller]
    fn assert_plan(plan: &RenewalPlan, ca: CaStep, issue_serving: bool, warnings: usize) {
        assert_eq!(plan.ca, ca);
        assert_eq!(plan.issue_serving, issue_serving);
        assert_eq!(plan.warnings().count(), warnings);
    }

    /// The lifetimes of the rotation tests: a CA of 300 days, serving certificates of 30.
    fn rotation_lifetimes() -> Lifetimes {
        Lifetimes {
            ca: days(300),
            serving: days(30),
            ..Lifetimes::default()
        }
    }

    /// `d` with a serving certificate issued at `at` by the CA it has.
    fn leaf_renewed(
        d: &SecretData,
        names: &ServiceNames,
        lifetimes: &Lifetimes,
        at: OffsetDateTime,
    ) -> SecretData {
        let plan = RenewalPlan {
            issue_serving: true,
            ..RenewalPlan::keep()
        };
        apply_plan(d, &StoredState::from_data(d), &plan, names, lifetimes, at).expect("renew leaf")
    }

    /// Why the serving certificate is unusable, when that is the one reason of `plan`.
    #[track_caller]
    fn serving_unusable(plan: &RenewalPlan) -> &MaterialError {
        match &plan.reasons[..] {
            [Reason::ServingUnusable(error)] => error,
            other => panic!("not one ServingUnusable reason: {other:?}"),
        }
    }

    fn leaf_of(data: &SecretData) -> CertInfo {
        StoredState::from_data(data)
            .serving
            .expect("serving")
            .leaf()
            .clone()
    }

    #[test]
    fn fresh_material_needs_nothing_until_two_thirds_of_the_serving_lifetime() {
        let d = data(t0());
        let plan = decide_at(&d, t0());
        assert!(plan.is_noop(), "{plan:?}");
        let renew_at = leaf_of(&d).renew_at();
        assert_eq!(plan.recheck_at, Some(renew_at));
        // 90 days from t0 - 5 min: two thirds is 60 days minus 3m20s after t0.
        assert_eq!(
            renew_at,
            t0() - time::Duration::minutes(5)
                + (time::Duration::days(90) + time::Duration::minutes(5)) * 2 / 3
        );

        assert!(decide_at(&d, renew_at - time::Duration::seconds(1)).is_noop());
        let due = decide_at(&d, renew_at);
        assert_plan(&due, CaStep::Keep, true, 0);
        assert_eq!(due.reasons, [Reason::ServingDue { renew_at }]);
    }

    #[test]
    fn an_expired_serving_certificate_is_replaced_at_once_keeping_the_ca() {
        let d = data(t0());
        let plan = decide_at(&d, t0() + time::Duration::days(100));
        assert_plan(&plan, CaStep::Keep, true, 1);
        let error = serving_unusable(&plan);
        assert!(matches!(error, MaterialError::Expired { .. }), "{error}");
    }

    #[test]
    fn wrong_names_are_fixed_at_once() {
        let d = data(t0());
        let moved = ServiceNames::new("other-service", "trustyai-operator-system");
        let plan = plan_renewal(&StoredState::from_data(&d), &moved, &lifetimes(), t0());
        assert!(plan.issue_serving);
        assert!(
            matches!(&plan.reasons[..], [Reason::ServingMissingNames(missing)] if missing.len() == 4)
        );

        let local = names().with_local(true);
        let plan = plan_renewal(&StoredState::from_data(&d), &local, &lifetimes(), t0());
        assert!(
            matches!(&plan.reasons[..], [Reason::ServingMissingNames(missing)] if missing == &["localhost", "127.0.0.1"])
        );
    }

    #[test]
    fn garbage_or_a_mismatched_key_is_replaced_keeping_a_valid_ca() {
        assert_plan(&decided_with(TLS_CRT, "garbage"), CaStep::Keep, true, 1);

        let other = data(t0());
        let plan = decided_with(TLS_KEY, &text(&other, TLS_KEY));
        assert_eq!(plan.ca, CaStep::Keep);
        let error = serving_unusable(&plan);
        assert!(
            matches!(error, MaterialError::KeyMismatch { .. }),
            "{error}"
        );
    }

    #[test]
    fn a_serving_certificate_from_a_foreign_ca_is_replaced() {
        let other = data(t0());
        let mut d = data(t0());
        set(&mut d, TLS_CRT, &text(&other, TLS_CRT));
        set(&mut d, TLS_KEY, &text(&other, TLS_KEY));
        let plan = decide_at(&d, t0());
        assert_eq!(plan.ca, CaStep::Keep);
        assert!(matches!(plan.reasons[..], [Reason::ServingUntrusted(_)]));
    }

    #[test]
    fn an_unusable_or_expired_ca_is_replaced_outright() {
        assert_plan(&decided_with(CA_KEY, "garbage"), CaStep::Replace, true, 1);

        let d = data(t0());
        let plan = decide_at(&d, t0() + time::Duration::days(5 * 366));
        assert_eq!(plan.ca, CaStep::Replace);
        assert!(matches!(
            plan.reasons[..],
            [Reason::Ca(CaReason::Unusable(
                MaterialError::Expired { .. }
            ))]
        ));
    }

    #[test]
    fn a_due_ca_is_rotated_keeping_the_serving_certificate() {
        let d = data(t0());
        let ca_renew_at = StoredState::from_data(&d).ca.expect("ca").cert().renew_at();
        // Keep the serving certificate fresh so only the CA is due.
        let fresh_leaf = leaf_renewed(
            &d,
            &names(),
            &lifetimes(),
            ca_renew_at - time::Duration::days(1),
        );
        let plan = decide_at(&fresh_leaf, ca_renew_at);
        assert_eq!(plan.ca, CaStep::Rotate);
        assert!(!plan.issue_serving);
        assert_eq!(
            plan.reasons,
            [Reason::Ca(CaReason::Due {
                renew_at: ca_renew_at
            })]
        );
    }

    #[test]
    fn an_empty_secret_is_initialised_without_a_warning() {
        let plan = decide_at(&SecretData::new(), t0());
        assert_plan(&plan, CaStep::Replace, true, 0);
        assert_eq!(plan.reasons, [Reason::Empty]);
    }

    #[test]
    fn garbage_in_the_previous_ca_is_dropped_with_a_warning() {
        let plan = decided_with(CA_PREVIOUS_CRT, "garbage");
        assert_plan(&plan, CaStep::Retire, false, 1);
    }

    /// Drives the Secret through time as the maintainer does (decide, write, decide again at
    /// `recheck_at`) and checks, at every write, that no client is left without trust:
    /// the previous bundle (still in the apiserver) trusts the new serving certificate, and the
    /// new bundle trusts the previous serving certificate (still served by lagging replicas).
    fn simulate(
        lifetimes: &Lifetimes,
        until: OffsetDateTime,
    ) -> Vec<(OffsetDateTime, Vec<Reason>, Bundle)> {
        let names = names();
        let mut now = t0();
        let mut d = crate::secret_layout::generate_data(&names, lifetimes, now).expect("data");
        let mut log = Vec::new();
        while now < until {
            let state = StoredState::from_data(&d);
            let plan = plan_renewal(&state, &names, lifetimes, now);
            if plan.is_noop() {
                state.material(now).expect("served material is valid");
                now = plan
                    .recheck_at
                    .expect("a noop plan says when to look again");
                continue;
            }
            let next = apply_plan(&d, &state, &plan, &names, lifetimes, now).expect("apply");
            let next_state = StoredState::from_data(&next);
            let old_bundle = state.bundle(now).expect("old bundle");
            let new_bundle = next_state.bundle(now).expect("new bundle");
            next_state.material(now).expect("new material is valid");
            chains_to(
                text(&next, TLS_CRT).as_bytes(),
                old_bundle.pem().as_bytes(),
                now,
            )
            .expect("the published bundle trusts the new serving certificate");
            chains_to(
                text(&d, TLS_CRT).as_bytes(),
                new_bundle.pem().as_bytes(),
                now,
            )
            .expect("the new bundle trusts the serving certificate lagging replicas serve");
            log.push((now, plan.reasons.clone(), new_bundle));
            d = next;
        }
        log
    }

    /// Seven hundred days of the Secret's life with the rotation lifetimes.
    struct History {
        lifetimes: Lifetimes,
        /// What [`simulate`] logged.
        log: Vec<(OffsetDateTime, Vec<Reason>, Bundle)>,
        /// Each write's reasons with the size of its bundle.
        steps: Vec<(Vec<Reason>, usize)>,
    }

    fn seven_hundred_days() -> History {
        let lifetimes = rotation_lifetimes();
        let log = simulate(&lifetimes, t0() + time::Duration::days(700));
        let steps: Vec<_> = log
            .iter()
            .map(|(_, reasons, bundle)| (reasons.clone(), bundle.certs().len()))
            .collect();
        History {
            lifetimes,
            log,
            steps,
        }
    }

    #[test]
    fn routine_serving_renewals_keep_a_one_ca_bundle() {
        let History { steps, .. } = seven_hundred_days();
        let renewals = steps
            .iter()
            .filter(|(r, n)| matches!(r[..], [Reason::ServingDue { .. }]) && *n == 1)
            .count();
        assert!(renewals >= 10, "{steps:#?}");
    }

    #[test]
    fn every_ca_rotation_overlaps_the_old_ca_with_the_new_one_in_three_steps() {
        let History {
            lifetimes,
            log,
            steps,
        } = seven_hundred_days();
        let rotation_starts: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| matches!(r[..], [Reason::Ca(CaReason::Due { .. })]))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(rotation_starts.len(), 3, "{steps:#?}");
        for i in rotation_starts {
            assert_eq!(steps[i].1, 2, "step 1 publishes old + new CA");
            assert_eq!(
                steps[i + 1],
                (vec![Reason::ServingOnPreviousCa], 2),
                "step 2 keeps both CAs"
            );
            assert_eq!(
                steps[i + 2],
                (vec![Reason::Ca(CaReason::RotationComplete)], 1),
                "step 3 drops the old CA"
            );
            let (t1, _, b1) = &log[i];
            let (t2, _, _) = &log[i + 1];
            let (t3, _, b3) = &log[i + 2];
            let overlap = time::Duration::try_from(lifetimes.overlap).expect("overlap");
            assert!(*t2 - *t1 >= overlap && *t3 - *t2 >= overlap);
            // The new CA (first in the step-1 bundle) is the only one left at step 3.
            assert_eq!(b3.certs()[0], b1.certs()[0]);
        }
    }

    #[test]
    fn a_serving_certificate_broken_mid_rotation_moves_to_the_new_ca_at_once() {
        let lifetimes = rotation_lifetimes();
        let names = names();
        let d = crate::secret_layout::generate_data(&names, &lifetimes, t0()).expect("data");
        let ca_due = StoredState::from_data(&d).ca.expect("ca").cert().renew_at();
        // Start the rotation with a fresh leaf, then break the leaf right away.
        let renewed = leaf_renewed(&d, &names, &lifetimes, ca_due - time::Duration::days(1));
        let state = StoredState::from_data(&renewed);
        let plan = plan_renewal(&state, &names, &lifetimes, ca_due);
        assert_eq!(plan.ca, CaStep::Rotate);
        let mut rotating =
            apply_plan(&renewed, &state, &plan, &names, &lifetimes, ca_due).expect("rotate");
        set(&mut rotating, TLS_CRT, "garbage");
        let plan = plan_renewal(
            &StoredState::from_data(&rotating),
            &names,
            &lifetimes,
            ca_due + time::Duration::seconds(1),
        );
        assert_eq!(plan.ca, CaStep::Keep);
        assert!(plan.issue_serving);
        let fixed = apply_plan(
            &rotating,
            &StoredState::from_data(&rotating),
            &plan,
            &names,
            &lifetimes,
            ca_due + time::Duration::seconds(1),
        )
        .expect("fix");
        let fixed_state = StoredState::from_data(&fixed);
        assert_eq!(fixed_state.bundle(ca_due).expect("bundle").certs().len(), 2);
        fixed_state
            .material(ca_due + time::Duration::seconds(1))
            .expect("valid");
        let _ = Duration::ZERO;
    }
}
