//! A failed API call on one named Secret: the webhook certificate Secret's and the operand CA
//! Secret's, which are read and written the same way.

/// An API call on a Secret failed.
#[derive(Debug, thiserror::Error)]
#[error("{action} Secret {namespace}/{name}")]
pub struct SecretCallError {
    /// What was being done.
    pub action: &'static str,
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The client error (boxed: it is large).
    #[source]
    pub source: Box<kube::Error>,
}

impl SecretCallError {
    /// `action` on the Secret `namespace`/`name` failed with `source`.
    pub fn new(action: &'static str, namespace: &str, name: &str, source: kube::Error) -> Self {
        Self {
            action,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: Box::new(source),
        }
    }
}
