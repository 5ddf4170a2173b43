//! Merging freshly computed conditions into the previous ones, `metav1.Condition`-style:
//! `lastTransitionTime` moves only when the status flips.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use trustyai_crds::v1::Condition;

/// A condition as computed, before its transition time is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Computed {
    pub type_: &'static str,
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
}

/// A condition status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub(crate) fn from_bool(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl Computed {
    pub(crate) fn new(
        type_: &'static str,
        status: Status,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// `computed` (in its order) with transition times carried over from `previous` where the
/// status did not change, followed by the previous conditions of types outside `owned_types`
/// (written by someone else; left as they are). Previous conditions of owned types that were
/// not computed this time (no longer applicable) are dropped.
pub(crate) fn merge(
    previous: &[Condition],
    computed: Vec<Computed>,
    owned_types: &[&str],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let now = whole_seconds(now);
    let mut out: Vec<Condition> = computed
        .into_iter()
        .map(|c| {
            let status = c.status.as_str();
            let last_transition_time = previous
                .iter()
                .find(|p| p.type_ == c.type_)
                .filter(|p| p.status == status)
                .and_then(|p| p.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            Condition {
                type_: c.type_.to_owned(),
                status: status.to_owned(),
                observed_generation: generation,
                last_transition_time: Some(last_transition_time),
                reason: Some(c.reason.to_owned()),
                message: Some(c.message),
            }
        })
        .collect();
    out.extend(
        previous
            .iter()
            .filter(|p| !owned_types.contains(&p.type_.as_str()))
            .cloned(),
    );
    out
}

/// The API server stores condition times with second precision; truncating here keeps the
/// computed status equal to what is read back, so it is not rewritten on every reconcile.
fn whole_seconds(time: &Time) -> Time {
    Timestamp::from_second(time.0.as_second()).map_or_else(|_| time.clone(), Time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::expect_used)]
    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("timestamp"))
    }

    fn previous(type_: &str, status: &str, at: Option<Time>) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: at,
            ..Condition::default()
        }
    }

    #[test]
    fn transition_time_moves_only_on_a_flip() {
        let before = vec![
            previous("Ready", "True", Some(time(100))),
            previous("Degraded", "True", Some(time(100))),
            previous("Foreign", "True", Some(time(50))),
            previous("PVCAvailable", "True", Some(time(100))),
        ];
        let merged = merge(
            &before,
            vec![
                Computed::new("Ready", Status::True, "R", "m"),
                Computed::new("Degraded", Status::False, "D", "m"),
                Computed::new("New", Status::Unknown, "N", "m"),
            ],
            &["Ready", "Degraded", "New", "PVCAvailable"],
            Some(4),
            &time(200),
        );
        let types: Vec<_> = merged.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "Degraded", "New", "Foreign"]);
        assert_eq!(merged[0].last_transition_time, Some(time(100)));
        assert_eq!(merged[1].last_transition_time, Some(time(200)));
        assert_eq!(merged[2].last_transition_time, Some(time(200)));
        assert_eq!(merged[3], before[2]);
        assert!(merged[..3].iter().all(|c| c.observed_generation == Some(4)));
    }

    #[test]
    fn missing_transition_time_is_filled_in() {
        let merged = merge(
            &[previous("Ready", "True", None)],
            vec![Computed::new("Ready", Status::True, "R", "m")],
            &["Ready"],
            None,
            &time(300),
        );
        assert_eq!(merged[0].last_transition_time, Some(time(300)));
    }

    #[test]
    fn now_is_truncated_to_seconds() {
        let precise = Time(Timestamp::new(1_000, 999_000_000).expect("timestamp"));
        assert_eq!(whole_seconds(&precise), time(1_000));
    }
}
