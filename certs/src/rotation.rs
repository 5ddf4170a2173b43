//! A CA's rotation: one rule for the webhook's CA ([`crate::renewal`]) and the operand CA
//! ([`crate::operand_ca`]). Pure: no I/O, no clock, no key generation.
//!
//! A CA is rotated at two thirds of its lifetime, with an overlap, so that no client ever meets
//! a certificate its trust bundle lacks:
//!
//! 1. [`CaStep::Rotate`]: the next CA is generated and becomes current, joining the bundles; the
//!    old one stays in them as the previous CA, and the certificates stay on it.
//! 2. from [`Timetable::move_at`], when the new CA has been out for [`Lifetimes::overlap`],
//!    certificates still on the previous CA move onto the current one.
//! 3. [`CaStep::Retire`]: once those have been out for the overlap too
//!    ([`Timetable::retire_at`]), the previous CA leaves.
//!
//! A rotation starts only once the previous one is over. A previous CA that is unusable or
//! expired is retired at once; a current CA that is missing, unusable or outside its validity is
//! replaced outright ([`CaStep::Replace`]): there is nothing to overlap with.
//!
//! Which certificates a side has, and when they moved, is the side's own: it tells the planner
//! when they moved ([`Rotation::retire_once_settled`]).

use std::time::Duration;

use time::OffsetDateTime;

use crate::lifetimes::{Lifetimes, later};
use crate::material::{CertInfo, MaterialError};
use crate::secret_layout::CA_CRT;

/// What happens to the CAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaStep {
    /// Keep the current CA, and the previous one while a rotation is in progress.
    Keep,
    /// Step 1: generate the next CA; the current one becomes the previous one.
    Rotate,
    /// Step 3, or a previous CA that cannot be used: drop the previous CA, keep the current one.
    Retire,
    /// Generate a new CA and keep nothing: there is no usable CA.
    Replace,
}

/// Why the CAs change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaReason {
    /// The CA (certificate or key) is missing, garbage, mismatched, or outside its validity.
    Unusable(MaterialError),
    /// The CA reached two thirds of its lifetime.
    Due {
        /// When it became due.
        renew_at: OffsetDateTime,
    },
    /// The previous CA is garbage, or lacks its key where one is kept.
    PreviousUnusable(MaterialError),
    /// The previous CA is outside its validity.
    PreviousExpired,
    /// Step 3: the certificates have been on the current CA for the overlap.
    RotationComplete,
}

impl CaReason {
    /// The step this reason calls for.
    pub fn step(&self) -> CaStep {
        match self {
            Self::Unusable(_) => CaStep::Replace,
            Self::Due { .. } => CaStep::Rotate,
            Self::PreviousUnusable(_) | Self::PreviousExpired | Self::RotationComplete => {
                CaStep::Retire
            }
        }
    }

    /// Whether this reason means something was broken, as opposed to routine rotation.
    pub fn is_warning(&self) -> bool {
        matches!(self, Self::Unusable(_) | Self::PreviousUnusable(_))
    }
}

/// When a CA's rotation takes its steps, read from the current CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timetable {
    /// Step 1 of the next rotation: the current CA reaches two thirds of its lifetime.
    pub due_at: OffsetDateTime,
    /// Step 2: the current CA has been out for the overlap, so certificates still on the
    /// previous CA move onto it.
    pub move_at: OffsetDateTime,
    backdate: Duration,
    overlap: Duration,
}

impl Timetable {
    /// The timetable of `current`.
    pub fn new(current: &CertInfo, lifetimes: &Lifetimes) -> Self {
        Self {
            due_at: current.renew_at(),
            move_at: later(
                current.not_before(),
                lifetimes.backdate.saturating_add(lifetimes.overlap),
            ),
            backdate: lifetimes.backdate,
            overlap: lifetimes.overlap,
        }
    }

    /// When `cert` was issued: its `not_before` is backdated from then.
    pub fn issued_at(&self, cert: &CertInfo) -> OffsetDateTime {
        later(cert.not_before(), self.backdate)
    }

    /// Step 3 for certificates that moved onto the current CA at `moved_at`: once they have been
    /// out for the overlap, every client has them and nothing needs the previous CA.
    pub fn retire_at(&self, moved_at: OffsetDateTime) -> OffsetDateTime {
        later(moved_at, self.overlap)
    }
}

/// What the planner found: a CA to replace, or one that stands and where its rotation is.
#[derive(Debug)]
pub enum CaPlan<'a, C, P> {
    /// There is no usable CA: [`CaStep::Replace`], for this reason.
    Replace(MaterialError),
    /// The current CA stands.
    Usable(Rotation<'a, C, P>),
}

/// A usable CA's rotation: the steps due, and when the next one may be.
#[derive(Debug)]
pub struct Rotation<'a, C, P> {
    /// The current CA.
    pub current: &'a C,
    /// The previous CA while a rotation is in progress; `None` when there is none, or when it
    /// is being retired for being unusable or expired.
    pub previous: Option<&'a P>,
    /// The current CA's timetable.
    pub timetable: Timetable,
    /// Why the CAs change, in the order the steps are taken; empty: they stay.
    pub reasons: Vec<CaReason>,
    /// When to decide again if nothing changes meanwhile.
    pub recheck_at: Option<OffsetDateTime>,
}

impl<C, P> Rotation<'_, C, P> {
    /// What the steps come to, taken together (in one write): a rotation replaces the previous
    /// CA, so it covers an unusable one retired before it.
    pub fn step(&self) -> CaStep {
        self.reasons.last().map_or(CaStep::Keep, CaReason::step)
    }

    /// The first step, for a writer that takes one step per write: planning again after it
    /// yields the rest.
    pub fn next_step(&self) -> CaStep {
        self.reasons.first().map_or(CaStep::Keep, CaReason::step)
    }

    /// Step 3, the certificates that were on the previous CA having moved onto the current one
    /// at `moved_at`: retires the previous CA once they have been out for the overlap, else
    /// says to decide again then. Outside a rotation there is nothing to retire.
    pub fn retire_once_settled(&mut self, moved_at: OffsetDateTime, now: OffsetDateTime) {
        if self.previous.is_none() {
            return;
        }
        let retire_at = self.timetable.retire_at(moved_at);
        if now >= retire_at {
            self.reasons.push(CaReason::RotationComplete);
        } else {
            self.recheck(retire_at);
        }
    }

    fn recheck(&mut self, at: OffsetDateTime) {
        self.recheck_at = Some(self.recheck_at.map_or(at, |current| current.min(at)));
    }
}

/// Plans the rotation of the CA `current` (`Err`: it could not be read), with `previous`
/// (`None`: absent), at `now`, as the module documentation says: step 1 and the repairs, and
/// the timetable of steps 2 and 3; step 3 is taken by [`Rotation::retire_once_settled`].
pub fn plan<'a, C: AsRef<CertInfo>, P: AsRef<CertInfo>>(
    current: Result<&'a C, &MaterialError>,
    previous: Option<Result<&'a P, &MaterialError>>,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> CaPlan<'a, C, P> {
    let current = match current.map_err(Clone::clone).and_then(|ca| {
        ca.as_ref().check_time(CA_CRT, now)?;
        Ok(ca)
    }) {
        Ok(ca) => ca,
        Err(e) => return CaPlan::Replace(e),
    };
    let mut reasons = Vec::new();
    let previous = match previous {
        None => None,
        Some(Err(e)) => {
            reasons.push(CaReason::PreviousUnusable(e.clone()));
            None
        }
        Some(Ok(previous)) if !previous.as_ref().is_valid_at(now) => {
            reasons.push(CaReason::PreviousExpired);
            None
        }
        Some(Ok(previous)) => Some(previous),
    };
    let timetable = Timetable::new(current.as_ref(), lifetimes);
    let mut rotation = Rotation {
        current,
        previous,
        timetable,
        reasons,
        recheck_at: None,
    };
    if rotation.previous.is_none() {
        if now >= timetable.due_at {
            rotation.reasons.push(CaReason::Due {
                renew_at: timetable.due_at,
            });
        } else {
            rotation.recheck(timetable.due_at);
        }
    }
    CaPlan::Usable(rotation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::CaCert;
    use crate::testutil::{ca, lifetimes, t0};

    fn at(seconds: i64) -> OffsetDateTime {
        t0() + time::Duration::seconds(seconds)
    }

    fn plan_at<'a>(
        current: &'a CaCert,
        previous: Option<Result<&'a CaCert, &MaterialError>>,
        now: OffsetDateTime,
    ) -> CaPlan<'a, CaCert, CaCert> {
        plan(Ok(current), previous, &lifetimes(), now)
    }

    /// What reading garbage in `what` gives.
    fn garbage(what: &str) -> MaterialError {
        MaterialError::NoCertificate {
            what: what.to_owned(),
        }
    }

    /// Asserts that `rotation` takes one step, for `reason`, which is a `warning` or not.
    fn assert_one_step(rotation: &Rotation<'_, CaCert, CaCert>, reason: CaReason, warning: bool) {
        assert_eq!(rotation.reasons, [reason]);
        assert_eq!(rotation.reasons[0].is_warning(), warning);
        assert_eq!(rotation.next_step(), rotation.step());
    }

    fn usable<'a>(plan: CaPlan<'a, CaCert, CaCert>) -> Rotation<'a, CaCert, CaCert> {
        match plan {
            CaPlan::Usable(rotation) => rotation,
            CaPlan::Replace(e) => panic!("the CA stands, but: {e}"),
        }
    }

    #[test]
    fn the_timetable_is_derived_from_the_ca_certificate() {
        let (_, current) = ca(t0());
        let lifetimes = lifetimes();
        let timetable = Timetable::new(current.cert(), &lifetimes);
        assert_eq!(timetable.due_at, current.cert().renew_at());
        // Generated at t0, backdated by five minutes; out for the 15-minute overlap at t0 + 15m.
        assert_eq!(timetable.issued_at(current.cert()), t0());
        assert_eq!(timetable.move_at, at(15 * 60));
        assert_eq!(timetable.retire_at(timetable.move_at), at(30 * 60));
    }

    #[test]
    fn a_fresh_ca_is_kept_until_it_is_due() {
        let (_, current) = ca(t0());
        let rotation = usable(plan_at(&current, None, t0()));
        assert_eq!(rotation.step(), CaStep::Keep);
        assert!(rotation.reasons.is_empty() && rotation.previous.is_none());
        assert_eq!(rotation.recheck_at, Some(rotation.timetable.due_at));

        let due_at = rotation.timetable.due_at;
        let before = usable(plan_at(&current, None, due_at - time::Duration::seconds(1)));
        assert_eq!(before.step(), CaStep::Keep);
    }

    #[test]
    fn step_1_a_due_ca_is_rotated() {
        let (_, current) = ca(t0());
        let due_at = current.cert().renew_at();
        let rotation = usable(plan_at(&current, None, due_at));
        assert_one_step(&rotation, CaReason::Due { renew_at: due_at }, false);
        assert_eq!(rotation.step(), CaStep::Rotate);
        assert_eq!(rotation.recheck_at, None);
    }

    #[test]
    fn no_rotation_starts_while_one_is_in_progress() {
        let (_, old) = ca(t0());
        let (_, current) = ca(t0() + time::Duration::days(1));
        let past_due = current.cert().renew_at();
        assert!(old.cert().is_valid_at(past_due));
        let rotation = usable(plan_at(&current, Some(Ok(&old)), past_due));
        assert_eq!(rotation.step(), CaStep::Keep);
        assert!(rotation.previous.is_some());
        assert_eq!(rotation.recheck_at, None);
    }

    #[test]
    fn step_2_is_the_moment_the_new_ca_has_been_out_for_the_overlap() {
        let (_, old) = ca(t0());
        let (_, current) = ca(at(3600));
        let rotation = usable(plan_at(&current, Some(Ok(&old)), at(3600)));
        assert_eq!(rotation.timetable.move_at, at(3600 + 15 * 60));
        assert_eq!(rotation.step(), CaStep::Keep);
    }

    #[test]
    fn step_3_retires_the_previous_ca_once_the_moved_certificates_have_been_out_for_the_overlap() {
        let (_, old) = ca(t0());
        let (_, current) = ca(at(3600));
        let moved_at = at(3600 + 15 * 60);
        let retire_at = at(3600 + 30 * 60);

        let mut early = usable(plan_at(
            &current,
            Some(Ok(&old)),
            retire_at - time::Duration::seconds(1),
        ));
        early.retire_once_settled(moved_at, retire_at - time::Duration::seconds(1));
        assert_eq!(early.step(), CaStep::Keep);
        assert_eq!(early.recheck_at, Some(retire_at));

        let mut settled = usable(plan_at(&current, Some(Ok(&old)), retire_at));
        settled.retire_once_settled(moved_at, retire_at);
        assert_one_step(&settled, CaReason::RotationComplete, false);
        assert_eq!(settled.step(), CaStep::Retire);
    }

    #[test]
    fn step_3_needs_a_rotation_in_progress() {
        let (_, current) = ca(t0());
        let mut rotation = usable(plan_at(&current, None, at(3600)));
        rotation.retire_once_settled(t0(), at(3600));
        assert_eq!(rotation.step(), CaStep::Keep);
        assert_eq!(rotation.recheck_at, Some(rotation.timetable.due_at));
    }

    #[test]
    fn an_unusable_or_expired_previous_ca_is_retired_at_once() {
        let (_, current) = ca(t0());
        let garbage = garbage("ca-previous.crt");
        let rotation = usable(plan_at(&current, Some(Err(&garbage)), t0()));
        assert_one_step(&rotation, CaReason::PreviousUnusable(garbage), true);
        assert_eq!(rotation.step(), CaStep::Retire);
        assert!(rotation.previous.is_none());

        let (_, expired) = ca(t0() - time::Duration::days(6 * 365));
        let rotation = usable(plan_at(&current, Some(Ok(&expired)), t0()));
        assert_one_step(&rotation, CaReason::PreviousExpired, false);
        assert_eq!(rotation.step(), CaStep::Retire);
    }

    #[test]
    fn a_due_ca_beside_an_unusable_previous_one_takes_both_steps_in_order() {
        let (_, current) = ca(t0());
        let due_at = current.cert().renew_at();
        let garbage = garbage("ca-previous.crt");
        let rotation = usable(plan_at(&current, Some(Err(&garbage)), due_at));
        assert_eq!(rotation.next_step(), CaStep::Retire);
        assert_eq!(
            rotation.step(),
            CaStep::Rotate,
            "the rotation replaces it anyway"
        );
        // Having taken the first step alone, planning again yields the rest.
        let rest = usable(plan_at(&current, None, due_at));
        assert_eq!(rest.reasons, rotation.reasons[1..]);
    }

    #[test]
    fn a_ca_that_cannot_be_used_is_replaced() {
        let garbage = garbage(CA_CRT);
        let replaced = plan::<CaCert, CaCert>(Err(&garbage), None, &lifetimes(), t0());
        assert!(matches!(replaced, CaPlan::Replace(e) if e == garbage));

        let (_, current) = ca(t0());
        let expired = t0() + time::Duration::days(5 * 366);
        assert!(matches!(
            plan_at(&current, None, expired),
            CaPlan::Replace(MaterialError::Expired { .. })
        ));
        let early = t0() - time::Duration::days(1);
        assert!(matches!(
            plan_at(&current, None, early),
            CaPlan::Replace(MaterialError::NotYetValid { .. })
        ));
        assert_eq!(CaReason::Unusable(garbage.clone()).step(), CaStep::Replace);
        assert!(CaReason::Unusable(garbage).is_warning());
    }
}
