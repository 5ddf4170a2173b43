//! From the Go operator, and back:
//!
//! - `adopt`: its Deployment adopted in place;
//! - `legacy`: its objects, stored without validation, keep working and say what to fix;
//! - `switch_from`: taking over its instances in every storage mode replaces no pod
//!   (`go_objects` writes what it made);
//! - `switch_back`: going back to it leaves every child it looks up.

mod adopt;
mod go_objects;
mod legacy;
mod switch_back;
mod switch_from;

use crate::reconcile::env::Env;

/// Deletes the webhook registrations the operator made: with no operator answering them
/// (`failurePolicy: Fail`), they would refuse every TrustyAIService write.
fn remove_registrations(env: &Env) {
    for (kind, name) in [
        (
            "validatingwebhookconfiguration",
            trustyai_operator::cli::default_names::VALIDATING_WEBHOOK_CONFIGURATION,
        ),
        (
            "mutatingwebhookconfiguration",
            trustyai_operator::cli::default_names::MUTATING_WEBHOOK_CONFIGURATION,
        ),
    ] {
        let (ok, out, err) = env
            .cp
            .kubectl(&["delete", kind, name, "--ignore-not-found"], None);
        assert!(ok, "{out}{err}");
    }
}
