//! A failed call to the API server, with what was being done to which object: the one error
//! context of every API call in the operator (the reconcile, the certificate Secrets, the
//! caBundle publisher), so each failure reads the same way (`reading Secret ns/name: ...`).

/// An API call failed.
#[derive(Debug, thiserror::Error)]
#[error("{action} {kind} {name}")]
pub struct ApiCallError {
    /// What was being done: `applying`, `reading`, `deleting`, `patching`, `listing`, ...
    pub action: &'static str,
    /// The kind of object.
    pub kind: &'static str,
    /// Its name (`namespace/name` where the namespace says which; the namespace for a list).
    pub name: String,
    /// The client error (boxed: it is large).
    #[source]
    pub source: Box<kube::Error>,
}

impl ApiCallError {
    /// `action` on `kind` `name` failed with `source`.
    pub fn new(
        action: &'static str,
        kind: &'static str,
        name: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        Self {
            action,
            kind,
            name: name.into(),
            source: Box::new(source),
        }
    }

    /// The error of `action` on `kind` `name`, for `map_err`.
    pub fn on(
        action: &'static str,
        kind: &'static str,
        name: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> Self {
        let name = name.into();
        move |source| Self::new(action, kind, name, source)
    }
}
