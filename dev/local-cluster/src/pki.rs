//! Certificates and keys for the local control plane: a cluster CA, the API server's serving
//! certificate, an admin client certificate and the service-account signing key.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// The first address of the Service range ([`crate::control_plane::SERVICE_CIDR`]): the
/// `kubernetes.default` Service's ClusterIP, so the API server's certificate names it.
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// Paths of the PEM files written by [`write_pki`].
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

fn params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    p.distinguished_name = dn;
    let now = OffsetDateTime::now_utc();
    p.not_before = now - Duration::hours(1);
    p.not_after = now + Duration::days(30);
    p
}

/// Writes a fresh PKI into `dir` (created if needed).
pub fn write_pki(dir: &Path) -> Result<Pki, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let write = |name: &str, pem: String| -> std::io::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, pem)?;
        Ok(path)
    };

    let ca_key = KeyPair::generate()?;
    let mut ca_params = params("trustyai-test-cluster-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate()?;
    let mut serving = params("kube-apiserver");
    serving.subject_alt_names = vec![
        SanType::IpAddress("127.0.0.1".parse()?),
        SanType::IpAddress(KUBERNETES_SERVICE_IP.parse()?),
        SanType::IpAddress(crate::real_node::NODE_IP.parse()?),
        SanType::DnsName("localhost".try_into()?),
        SanType::DnsName("kubernetes".try_into()?),
        SanType::DnsName("kubernetes.default".try_into()?),
        SanType::DnsName("kubernetes.default.svc".try_into()?),
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = params("admin");
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let sa_key = KeyPair::generate()?;

    Ok(Pki {
        ca_cert: write("ca.crt", ca_pem)?,
        ca_key: write("ca.key", issuer.key().serialize_pem())?,
        serving_cert: write("apiserver.crt", serving_cert.pem())?,
        serving_key: write("apiserver.key", serving_key.serialize_pem())?,
        admin_cert: write("admin.crt", admin_cert.pem())?,
        admin_key: write("admin.key", admin_key.serialize_pem())?,
        sa_key: write("sa.key", sa_key.serialize_pem())?,
        sa_pub: write("sa.pub", sa_key.public_key_pem())?,
    })
}
