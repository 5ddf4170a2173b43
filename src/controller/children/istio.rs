//! The Istio DestinationRule and VirtualService, wanted while an InferenceService of the
//! namespace logs to this TrustyAIService through Istio (and deleted once none does).

use super::super::resources::istio;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered};
use super::{optional_owned_watch, render_one};

/// The DestinationRule's declaration.
pub const DESTINATION_RULE: Declaration = Declaration {
    watch: optional_owned_watch(istio::destination_rule_api_resource, |a| {
        a.destination_rules
    }),
    applies_with: |a| a.destination_rules,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        if inputs.istio_wanted {
            render_one(&istio::destination_rule(instance))
        } else {
            Ok(Vec::new())
        }
    })),
};

/// The VirtualService's declaration.
pub const VIRTUAL_SERVICE: Declaration = Declaration {
    watch: optional_owned_watch(istio::virtual_service_api_resource, |a| a.virtual_services),
    applies_with: |a| a.virtual_services,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        if inputs.istio_wanted {
            render_one(&istio::virtual_service(instance))
        } else {
            Ok(Vec::new())
        }
    })),
};
