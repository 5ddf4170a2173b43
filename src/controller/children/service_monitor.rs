//! The ServiceMonitors, where the Prometheus Operator's API is served: `<cr>` in the
//! TrustyAIService's namespace, and `trustyai-metrics` in the operator namespace, shared by all
//! and owned by none.

use super::super::resources::images::is_java_service;
use super::super::resources::service_monitor;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered, Wanted};
use super::{optional_owned_watch, wanted};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: optional_owned_watch(service_monitor::api_resource, |a| a.service_monitors),
    applies_with: |a| a.service_monitors,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        Ok(vec![
            wanted(&service_monitor::local(
                instance,
                inputs.apis.service_ca(),
                is_java_service(&inputs.images.service.image),
            ))?,
            Wanted {
                shared: true,
                ..wanted(&service_monitor::central(inputs.operator_namespace))?
            },
        ])
    })),
};
