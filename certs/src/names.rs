//! The names the webhook Service is reached by, which the serving certificate must cover.

use std::net::{IpAddr, Ipv4Addr};

use crate::material::CertInfo;

/// The webhook Service's identity: the apiserver dials `<service>.<namespace>.svc`, other
/// clients may use the shorter or the fully qualified forms, so the certificate carries all four.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceNames {
    service: String,
    namespace: String,
    local: bool,
}

impl ServiceNames {
    /// Names of the Service `service` in `namespace` (in-cluster mode).
    pub fn new(service: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            namespace: namespace.into(),
            local: false,
        }
    }

    /// Also cover `localhost` and `127.0.0.1`, for an operator running outside the cluster
    /// (the apiserver then calls a URL on the loopback address).
    pub fn with_local(mut self, local: bool) -> Self {
        self.local = local;
        self
    }

    /// The Service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The Service namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// DNS subject alternative names, most specific last.
    pub fn dns_names(&self) -> Vec<String> {
        let (svc, ns) = (&self.service, &self.namespace);
        let mut names = vec![
            svc.clone(),
            format!("{svc}.{ns}"),
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}.svc.cluster.local"),
        ];
        if self.local {
            names.push("localhost".to_owned());
        }
        names
    }

    /// IP subject alternative names.
    pub fn ip_addresses(&self) -> Vec<IpAddr> {
        if self.local {
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
        } else {
            Vec::new()
        }
    }

    /// Subject common name of the serving certificate. Clients ignore it (SANs decide), but a
    /// readable CN helps whoever inspects the Secret. X.509 caps a CN at 64 characters.
    pub(crate) fn common_name(&self) -> String {
        let full = format!("{}.{}.svc", self.service, self.namespace);
        if full.len() <= 64 {
            full
        } else {
            self.service.chars().take(64).collect()
        }
    }

    /// The names (as text) this certificate lacks; empty when it covers all of them.
    /// DNS names compare case-insensitively, as in DNS.
    pub fn missing_from(&self, cert: &CertInfo) -> Vec<String> {
        let mut missing: Vec<String> = self
            .dns_names()
            .into_iter()
            .filter(|want| {
                !cert
                    .dns_names()
                    .iter()
                    .any(|have| have.eq_ignore_ascii_case(want))
            })
            .collect();
        missing.extend(
            self.ip_addresses()
                .into_iter()
                .filter(|ip| !cert.ip_addresses().contains(ip))
                .map(|ip| ip.to_string()),
        );
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_the_four_service_forms() {
        let names = ServiceNames::new("hook", "ops");
        assert_eq!(
            names.dns_names(),
            [
                "hook",
                "hook.ops",
                "hook.ops.svc",
                "hook.ops.svc.cluster.local"
            ]
        );
        assert!(names.ip_addresses().is_empty());
        assert_eq!(names.common_name(), "hook.ops.svc");
    }

    #[test]
    fn local_mode_adds_loopback() {
        let names = ServiceNames::new("hook", "ops").with_local(true);
        assert!(names.dns_names().contains(&"localhost".to_owned()));
        assert_eq!(names.ip_addresses(), [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    }

    #[test]
    fn long_names_keep_the_common_name_within_64_characters() {
        let names = ServiceNames::new("s".repeat(63), "n".repeat(63));
        assert!(names.common_name().len() <= 64);
    }
}
