//! The ServiceAccount `<cr>-proxy`, the identity of the pods; kube-rbac-proxy uses it for token and
//! subject access reviews.

use k8s_openapi::api::core::v1::ServiceAccount;

use super::declaration::{Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, render_one};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<ServiceAccount>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Rendered::new(|instance, _| render_one(&service_account(instance))),
};

/// The ServiceAccount `<cr>-proxy`, owned by the TrustyAIService.
pub fn service_account(instance: &Instance<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: instance.owned_meta(
            names::proxy_service_account(instance.name()),
            labels::metadata(instance),
        ),
        ..ServiceAccount::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{NAMESPACE, pvc_instance};

    #[test]
    fn the_proxy_service_account_is_a_plain_owned_child() {
        let instance = pvc_instance();
        let sa = service_account(&instance);
        assert_eq!(sa.metadata.name.as_deref(), Some("tas-proxy"));
        assert_eq!(sa.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(
            sa.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        assert_eq!(sa.metadata.labels, Some(labels::metadata(&instance)));
        assert!(sa.secrets.is_none() && sa.automount_service_account_token.is_none());
    }
}
