//! Regular expressions shared by the CRD's CEL rules and the admission webhook, so both say
//! the same thing. They use the RE2 syntax that both CEL and the `regex` crate accept.

/// A DNS-1123 subdomain: lowercase alphanumerics, `-` and `.`, starting and ending with an
/// alphanumeric (names of Secrets, PersistentVolumes).
pub const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// A DNS-1035 label: lowercase alphanumerics and `-`, starting with a letter (Service names).
pub const DNS1035_LABEL: &str = r"^[a-z]([-a-z0-9]*[a-z0-9])?$";

/// Longest TrustyAIService name: the Service `<name>-tls` must stay a 63-character label.
pub const SERVICE_NAME_MAX: usize = 59;

/// `metrics.schedule`: one or more `<integer><unit>` groups.
pub const SCHEDULE: &str = r"^([0-9]+(ms|s|m|h))+$";

/// A `..` path segment.
pub const DOT_DOT_SEGMENT: &str = r"(^|/)\.\.(/|$)";

/// An image reference: `[registry[:port]/]path[:tag][@sha256:<64 hex>]`.
pub const IMAGE_REFERENCE: &str = r"^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$";
