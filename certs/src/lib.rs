//! TLS material for the webhook server: CA and serving certificate, their Secret, rotation, caBundle publishing.
pub fn x(){}
