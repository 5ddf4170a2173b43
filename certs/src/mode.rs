//! Where the serving certificate comes from.

use std::fmt;
use std::str::FromStr;

/// Certificate source, as chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CertMode {
    /// The operator's own CA and certificate in a Secret (default).
    #[default]
    SelfSigned,
    /// Certificate, key and (optionally) CA files, hot-reloaded.
    Files,
    /// A cert-manager Certificate's Secret, mounted as files.
    CertManager,
    /// The OpenShift service-ca Secret, mounted as files; service-ca injects the bundle itself.
    OpenShift,
}

impl CertMode {
    /// Every mode's name, as accepted by [`FromStr`].
    pub const NAMES: [&'static str; 4] = ["self-signed", "files", "cert-manager", "openshift"];

    /// Whether the operator publishes the CA bundle. Self-signed always does (nobody else knows
    /// the CA); files and cert-manager do when asked (`inject`) and a CA file is configured
    /// (cert-manager's own cainjector is the alternative); OpenShift never does.
    pub fn publishes_ca_bundle(self, inject: bool) -> bool {
        match self {
            Self::SelfSigned => true,
            Self::Files | Self::CertManager => inject,
            Self::OpenShift => false,
        }
    }
}

impl fmt::Display for CertMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::SelfSigned => Self::NAMES[0],
            Self::Files => Self::NAMES[1],
            Self::CertManager => Self::NAMES[2],
            Self::OpenShift => Self::NAMES[3],
        };
        f.write_str(name)
    }
}

/// An unknown mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown certificate mode {0:?}; expected one of self-signed, files, cert-manager, openshift"
)]
pub struct UnknownCertMode(pub String);

impl FromStr for CertMode {
    type Err = UnknownCertMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "self-signed" => Ok(Self::SelfSigned),
            "files" => Ok(Self::Files),
            "cert-manager" => Ok(Self::CertManager),
            "openshift" => Ok(Self::OpenShift),
            other => Err(UnknownCertMode(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in CertMode::NAMES {
            let mode: CertMode = name.parse().expect("known");
            assert_eq!(mode.to_string(), name);
        }
        assert!("acme".parse::<CertMode>().is_err());
    }

    #[test]
    fn only_openshift_never_injects() {
        assert!(CertMode::SelfSigned.publishes_ca_bundle(false));
        assert!(CertMode::CertManager.publishes_ca_bundle(true));
        assert!(!CertMode::CertManager.publishes_ca_bundle(false));
        assert!(!CertMode::OpenShift.publishes_ca_bundle(true));
    }
}
