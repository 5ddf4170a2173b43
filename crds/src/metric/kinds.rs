//! The metric types a TrustyAIMetric can schedule, spelled as the TrustyAI service's routes
//! spell them (`/metrics/group/fairness/<type>` and `/metrics/drift/<type>`), with the
//! service's deprecated aliases and the name its Prometheus gauge carries.

/// Whether a metric compares groups of one attribute (fairness) or a model's inputs against a
/// reference (drift): they take different parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Group fairness: protected attribute, privileged and unprivileged values, outcome.
    Fairness,
    /// Data drift: a reference tag and the columns to compare.
    Drift,
}

impl Family {
    /// The family's name in messages: `fairness` or `drift`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Fairness => "fairness",
            Self::Drift => "drift",
        }
    }

    /// The other family.
    pub const fn other(self) -> Self {
        match self {
            Self::Fairness => Self::Drift,
            Self::Drift => Self::Fairness,
        }
    }

    /// The names of the family's types, in order.
    pub fn members(self) -> Vec<&'static str> {
        METRIC_TYPES
            .iter()
            .filter(|t| t.family == self)
            .map(|t| t.name)
            .collect()
    }
}

/// One metric type the service schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricType {
    /// The name in `spec.type`: the last segment of the service's route.
    pub name: &'static str,
    /// Fairness or drift.
    pub family: Family,
    /// The route the type's computations are scheduled on (`<base>/request`, `POST` to add,
    /// `DELETE` with `{"requestId"}` to remove).
    pub route: &'static str,
    /// The gauge the service publishes the type's values as, on `/q/metrics`
    /// (`trustyai_` + its metric name in lower case).
    pub gauge: &'static str,
}

/// Every metric type, in the order error messages list them.
pub const METRIC_TYPES: [MetricType; 7] = [
    of(
        "spd",
        Family::Fairness,
        "/metrics/group/fairness/spd",
        "trustyai_spd",
    ),
    of(
        "dir",
        Family::Fairness,
        "/metrics/group/fairness/dir",
        "trustyai_dir",
    ),
    of(
        "comparemeans",
        Family::Drift,
        "/metrics/drift/comparemeans",
        "trustyai_comparemeans",
    ),
    of(
        "kstest",
        Family::Drift,
        "/metrics/drift/kstest",
        "trustyai_kstest",
    ),
    of(
        "ksteststreaming",
        Family::Drift,
        "/metrics/drift/ksteststreaming",
        "trustyai_ksteststreaming",
    ),
    of(
        "jensenshannon",
        Family::Drift,
        "/metrics/drift/jensenshannon",
        "trustyai_jensenshannon",
    ),
    of("mmd", Family::Drift, "/metrics/drift/mmd", "trustyai_mmd"),
];

const fn of(
    name: &'static str,
    family: Family,
    route: &'static str,
    gauge: &'static str,
) -> MetricType {
    MetricType {
        name,
        family,
        route,
        gauge,
    }
}

/// The service's deprecated names (still routed, scheduled as the type they alias): the
/// defaulting webhook replaces them with the current name and warns.
pub const ALIASES: [(&str, &str); 3] = [
    ("meanshift", "comparemeans"),
    ("approxkstest", "ksteststreaming"),
    ("fouriermmd", "mmd"),
];

/// The metric type named `name` (current names only).
pub fn metric_type(name: &str) -> Option<&'static MetricType> {
    METRIC_TYPES.iter().find(|t| t.name == name)
}

/// The current name an alias stands for.
pub fn alias_of(name: &str) -> Option<&'static str> {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, current)| *current)
}

/// The names `spec.type` accepts, in order.
pub fn names() -> Vec<&'static str> {
    METRIC_TYPES.iter().map(|t| t.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_end_in_the_type_name() {
        for t in METRIC_TYPES {
            assert!(t.route.ends_with(&format!("/{}", t.name)), "{t:?}");
            assert_eq!(t.gauge, format!("trustyai_{}", t.name), "{t:?}");
        }
    }

    #[test]
    fn every_alias_names_a_current_type() {
        for (alias, current) in ALIASES {
            assert!(metric_type(current).is_some(), "{alias}");
            assert!(metric_type(alias).is_none(), "{alias}");
        }
    }
}
