//! Command-line interface.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Kubernetes operator for the TrustyAI Service: reconciles TrustyAIService objects and serves
/// their admission and conversion webhooks from one process.
#[derive(Debug, Parser)]
#[command(name = "trustyai-operator", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator: webhook server, certificate maintenance and the reconcile loop.
    Run(Box<RunArgs>),
    /// Print a CustomResourceDefinition as YAML: TrustyAIService's (both versions, v1 stored)
    /// unless `--kind TrustyAIMetric`.
    Crd(CrdArgs),
    /// Print the operator's version.
    Version,
    /// Default and validate TrustyAIService manifests offline, with the webhooks' rules
    /// (exit 0: all valid, 1: some invalid, 2: input unreadable).
    Validate(ValidateArgs),
    /// Rewrite TrustyAIService manifests to another API version, with the conversion webhook's
    /// functions; other documents pass through untouched (exit codes as for validate).
    Convert(ConvertArgs),
    /// Re-write every stored TrustyAIService as v1 and drop other versions from the CRD's
    /// status.storedVersions: the step before a release stops serving v1alpha1.
    MigrateStorage(MigrateStorageArgs),
    /// Without a running operator: release every TrustyAIService (undo its wiring, delete its
    /// ClusterRoleBindings, remove the operator's finalizer) and delete what the operator left
    /// (bindings, the shared ServiceMonitor, its certificate Secrets and Lease). Run it after
    /// `helm uninstall`; the CRD and retained claims stay.
    Uninstall(UninstallArgs),
    /// Check, through the API server, that the installed webhooks default, convert and validate
    /// TrustyAIServices (server-side dry runs: nothing is stored). The chart's `helm test` runs
    /// it (exit 0: all answered as they should, 1: a check failed, 2: no cluster to ask).
    CheckInstall(CheckInstallArgs),
}

/// Options of `crd`.
#[derive(Debug, Args)]
pub struct CrdArgs {
    /// The kind whose CRD to print.
    #[arg(long, value_enum, default_value_t = CrdKind::TrustyAIService)]
    pub kind: CrdKind,
}

/// The kinds the operator defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdKind {
    /// `trustyaiservices.trustyai.opendatahub.io`.
    #[value(name = "TrustyAIService")]
    TrustyAIService,
    /// `trustyaimetrics.trustyai.opendatahub.io`.
    #[value(name = "TrustyAIMetric")]
    TrustyAIMetric,
}

/// Options of `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,

    /// The stored objects, for UPDATE semantics (matched by namespace and name); without it,
    /// CREATE semantics apply.
    #[arg(long)]
    pub old: Option<PathBuf>,

    /// Also print each document as the mutating webhook would default it.
    #[arg(long)]
    pub show_defaults: bool,

    #[command(flatten)]
    pub image_prefixes: ImagePrefixArgs,
}

/// The image prefixes `spec.image` may use, for `run` and `validate` alike.
#[derive(Debug, Args)]
pub struct ImagePrefixArgs {
    /// Image prefixes a TrustyAIService may use in spec.image (comma-separated). While the
    /// operator runs, the operator ConfigMap's allowedImagePrefixes, when set, replaces this list.
    #[arg(
        long,
        env = "ALLOWED_IMAGE_PREFIXES",
        value_delimiter = ',',
        default_value = crate::controller::context::DEFAULT_ALLOWED_IMAGE_PREFIX
    )]
    pub allowed_image_prefixes: Vec<String>,
}

/// Options of `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Target version: v1 or v1alpha1.
    #[arg(long)]
    pub to: String,

    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
}

/// Options of `migrate-storage`.
#[derive(Debug, Args)]
pub struct MigrateStorageArgs {
    /// Path of a kubeconfig file; without it `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// config is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

/// The names of what the operator keeps in the cluster: where `run` creates them and what
/// `uninstall` removes.
#[derive(Debug, Args)]
pub struct OperatorNames {
    /// Namespace the operator runs in: its certificate Secret, Lease and ConfigMap live there.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = trustyai_crds::crd::DEFAULT_WEBHOOK_NAMESPACE
    )]
    pub namespace: String,

    /// Secret holding the operator's CA and serving certificate (self-signed mode).
    #[arg(long, default_value = default_names::CERT_SECRET)]
    pub cert_secret: String,

    /// Secret in the operator namespace holding the CA of the operands' serving certificates
    /// (issued where no OpenShift service-ca operator does it).
    #[arg(long, default_value = default_names::OPERAND_CA_SECRET)]
    pub operand_ca_secret: String,

    /// Name of the leader Lease in the operator namespace.
    #[arg(long, default_value = default_names::LEASE)]
    pub lease_name: String,

    /// Name of the ValidatingWebhookConfiguration whose caBundle the operator maintains.
    #[arg(long, default_value = default_names::VALIDATING_WEBHOOK_CONFIGURATION)]
    pub validating_webhook_configuration: String,

    /// Name of the MutatingWebhookConfiguration whose caBundle the operator maintains.
    #[arg(long, default_value = default_names::MUTATING_WEBHOOK_CONFIGURATION)]
    pub mutating_webhook_configuration: String,
}

/// The default names of the objects `OperatorNames` names (the chart uses them too).
pub mod default_names {
    /// The operator's CA and serving certificate Secret (self-signed mode).
    pub const CERT_SECRET: &str = "trustyai-operator-webhook-tls";
    /// The operand CA Secret.
    pub const OPERAND_CA_SECRET: &str = trustyai_certs::operand_ca::DEFAULT_CA_SECRET;
    /// The leader Lease.
    pub const LEASE: &str = "trustyai-operator-leader";
    /// The ValidatingWebhookConfiguration.
    pub const VALIDATING_WEBHOOK_CONFIGURATION: &str = "trustyai-operator-validating";
    /// The MutatingWebhookConfiguration.
    pub const MUTATING_WEBHOOK_CONFIGURATION: &str = "trustyai-operator-mutating";
}

/// Options of `uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Path of a kubeconfig file; without it `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// config is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// The names the operator ran with (its defaults unless changed).
    #[command(flatten)]
    pub names: OperatorNames,

    /// Also delete the webhook registrations (when the operator created them with
    /// --create-webhook-configurations; a Helm release removes its own).
    #[arg(long)]
    pub webhook_configurations: bool,
}

/// Options of `check-install`.
#[derive(Debug, Args)]
pub struct CheckInstallArgs {
    /// Path of a kubeconfig file; without it `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// config is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespace of the dry-run TrustyAIServices; the webhooks' namespaceSelector must match it.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
}

/// Logging options, shared by every subcommand.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter in `tracing` EnvFilter syntax, for example `info` or `trustyai=debug,kube=warn`.
    #[arg(long, env = "RUST_LOG", default_value = "info", global = true)]
    pub log_level: String,

    /// Log format: `json` for log collectors, `text` for terminals.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What the webhook server may spend. With `failurePolicy: Fail` it is in the write path of
/// every TrustyAIService, so it must refuse work (429, 413) before it runs out of memory.
#[derive(Debug, Args)]
pub struct WebhookLimitArgs {
    /// Memory, in MiB, that webhook requests in flight may reserve together; an admission
    /// request reserves 8× its body, a conversion 6×. The process needs about this plus 40 MiB
    /// (its peak with 1,000 TrustyAIServices).
    #[arg(long, default_value_t = trustyai_webhooks::HttpsOptions::DEFAULT_MEMORY_BUDGET_BYTES / MIB)]
    pub webhook_memory_budget_mib: usize,

    /// How long an admission request (/mutate, /validate) waits for room in the memory budget
    /// before it gets 429 (its deadline is 5 s). A conversion (/convert) waits up to 25 s (its
    /// deadline is 30 s: the API server gives conversions no shorter deadline than the client
    /// request's own).
    #[arg(long, default_value = "2s", value_parser = humantime_duration)]
    pub webhook_queue_timeout: Duration,

    /// A webhook connection with no request in flight for this long is closed.
    #[arg(long, default_value = "60s", value_parser = humantime_duration)]
    pub webhook_idle_timeout: Duration,

    /// Most webhook connections open at once.
    #[arg(long, default_value_t = trustyai_webhooks::HttpsOptions::DEFAULT_MAX_CONNECTIONS)]
    pub webhook_max_connections: usize,

    /// HTTP/2: most webhook requests in flight on one connection.
    #[arg(long, default_value_t = trustyai_webhooks::HttpsOptions::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS)]
    pub webhook_max_streams: u32,

    /// PEM file of the CA(s) that webhook clients' certificates must chain to (the API server's
    /// webhook client certificate, from its admission configuration); read at start and again
    /// whenever it changes. Without it no client certificate is asked for.
    #[arg(long)]
    pub webhook_client_ca_file: Option<PathBuf>,
}

const MIB: usize = 1024 * 1024;

impl WebhookLimitArgs {
    /// The server options these flags set, over the defaults (the client CA file is read by
    /// the caller, which keeps it loaded).
    pub fn https_options(&self) -> trustyai_webhooks::HttpsOptions {
        trustyai_webhooks::HttpsOptions {
            memory_budget_bytes: self.webhook_memory_budget_mib.saturating_mul(MIB),
            queue_timeout: self.webhook_queue_timeout,
            idle_timeout: self.webhook_idle_timeout,
            max_connections: self.webhook_max_connections,
            http2_max_concurrent_streams: self.webhook_max_streams,
            ..trustyai_webhooks::HttpsOptions::default()
        }
    }
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The names of what the operator keeps in the cluster.
    #[command(flatten)]
    pub names: OperatorNames,

    /// Where the webhook server's certificate comes from, and the lifetimes of those the
    /// operator issues.
    #[command(flatten)]
    pub certificates: CertificateArgs,

    /// Leader election among replicas.
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,

    /// Path of a kubeconfig file; without it `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// config is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the HTTPS webhook server (conversion and admission).
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub webhook_address: SocketAddr,

    /// Address of the plain-HTTP ops server: /healthz, /readyz, /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub ops_address: SocketAddr,

    /// A second address serving the ops routes, for probes that expect them apart from metrics
    /// (the Go operator's Deployment probes :8081 and scrapes :8080).
    #[arg(long)]
    pub probe_address: Option<SocketAddr>,

    /// Local mode: serve the webhooks on this address and have the API server call
    /// `https://<address>` directly (no Service); the certificate also names localhost and
    /// 127.0.0.1. Used by `make run` against the local control plane.
    #[arg(long)]
    pub local_webhook_address: Option<SocketAddr>,

    /// Local mode: the base URL the API server is told to call (default `https://<local address>`);
    /// several local replicas behind one front share it.
    #[arg(long, requires = "local_webhook_address")]
    pub webhook_url: Option<String>,

    /// Name of the webhook Service in the operator namespace (certificate names and the
    /// clientConfig the operator publishes).
    #[arg(
        long,
        env = "SERVICE_NAME",
        default_value = trustyai_crds::crd::DEFAULT_WEBHOOK_SERVICE
    )]
    pub service_name: String,

    /// Port of the webhook Service.
    #[arg(long, default_value_t = 443)]
    pub service_port: i32,

    /// Apply the ValidatingWebhookConfiguration and MutatingWebhookConfiguration at start (local
    /// mode; the Helm chart renders them otherwise).
    #[arg(long)]
    pub create_webhook_configurations: bool,

    /// `timeoutSeconds` of the webhook registrations the operator creates.
    #[arg(long, default_value_t = 10)]
    pub webhook_timeout_seconds: i32,

    /// Do not apply the CRD at start (for platform teams that manage CRDs themselves). The
    /// conversion caBundle is still maintained.
    #[arg(long)]
    pub no_crd_maintenance: bool,

    #[command(flatten)]
    pub image_prefixes: ImagePrefixArgs,

    /// How long in-flight webhook requests may take to finish on shutdown.
    #[arg(long, default_value = "10s", value_parser = humantime_duration)]
    pub drain_timeout: Duration,

    /// Limits of the webhook server.
    #[command(flatten)]
    pub webhook_limits: WebhookLimitArgs,

    /// The verb a caller of a TrustyAIService's API needs on its Service (`services/<cr>`):
    /// `get` for every request, or the one the HTTP method gives (`get` to read, `create` to
    /// upload). A change rolls the TrustyAIServices' pods.
    #[arg(long, value_enum, default_value_t = crate::controller::ServiceAccess::Get)]
    pub service_access: crate::controller::ServiceAccess,

    /// ClusterRole (token and subject access reviews) each TrustyAIService's kube-rbac-proxy
    /// ServiceAccount is bound to; a Helm release may name it differently.
    #[arg(long, default_value = trustyai_crds::contract::PROXY_CLUSTER_ROLE)]
    pub proxy_cluster_role: String,

    /// How long a failing cleanup (unwiring, ClusterRoleBinding removal) may hold up the
    /// deletion of a TrustyAIService before its finalizer is removed anyway.
    #[arg(long, default_value = "5m", value_parser = humantime_duration)]
    pub cleanup_timeout: Duration,

    /// How long a TrustyAIService's PersistentVolumeClaim may stay unbound before a `PVCPending`
    /// Warning event says so.
    #[arg(long, default_value = "2m", value_parser = humantime_duration)]
    pub pvc_pending_grace: Duration,
}

/// Options of `run`: the webhook server's certificate and the operands' certificates.
#[derive(Debug, Args)]
#[command(next_help_heading = "Certificates")]
pub struct CertificateArgs {
    /// Where the serving certificate comes from: self-signed (the operator's own CA, kept in
    /// --cert-secret), files, cert-manager (mounted Secret files) or openshift (service-ca files).
    #[arg(long, env = "CERT_MODE", default_value = "self-signed")]
    pub cert_mode: trustyai_certs::CertMode,

    /// Folder with tls.crt, tls.key and (optionally) ca.crt (files, cert-manager and openshift modes).
    #[arg(long, default_value = "/etc/trustyai-operator/tls")]
    pub cert_dir: PathBuf,

    /// In files and cert-manager modes, publish ca.crt as the caBundle (instead of relying on
    /// cert-manager's cainjector).
    #[arg(long)]
    pub inject_ca_bundle: bool,

    /// Lifetime of the serving certificate (renewed at two thirds of it).
    #[arg(long, default_value = "90d", value_parser = humantime_duration)]
    pub serving_cert_lifetime: Duration,

    /// Lifetime of the operator's CA (rotated, with overlap, at two thirds of it).
    #[arg(long, default_value = "1825d", value_parser = humantime_duration)]
    pub ca_lifetime: Duration,

    /// How long a new CA (the webhook server's or the operands') is published before it signs,
    /// and the old one kept after.
    #[arg(long, default_value = "15m", value_parser = humantime_duration)]
    pub ca_overlap: Duration,

    /// Lifetime of the CA of the operands' serving certificates (rotated, with overlap, at two
    /// thirds of it).
    #[arg(long, default_value = "1825d", value_parser = humantime_duration)]
    pub operand_ca_lifetime: Duration,

    /// Lifetime of the operands' serving certificates (renewed when a third of it is left).
    #[arg(long, default_value = "90d", value_parser = humantime_duration)]
    pub operand_cert_lifetime: Duration,
}

impl CertificateArgs {
    /// Whether the operator publishes the CA bundle itself (self-signed mode, or files and
    /// cert-manager modes with `--inject-ca-bundle`).
    pub fn publishes_ca_bundle(&self) -> bool {
        self.cert_mode.publishes_ca_bundle(self.inject_ca_bundle)
    }
}

/// Options of `run`: leader election among replicas (the Lease is `--lease-name`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Leader election")]
pub struct LeaderElectionArgs {
    /// Run without leader election: this process reconciles unconditionally. Only for a single
    /// replica (two would both reconcile).
    #[arg(long)]
    pub no_leader_election: bool,

    /// How long the lease is valid after its last renewal; a standby takes over after this when
    /// the leader stops renewing without releasing.
    #[arg(long, default_value = "15s", value_parser = humantime_duration)]
    pub lease_duration: Duration,

    /// The leader stops reconciling when it could not renew for this long (less than
    /// --lease-duration, so it has stopped before anyone may take over).
    #[arg(long, default_value = "10s", value_parser = humantime_duration)]
    pub renew_deadline: Duration,

    /// Time between attempts to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = humantime_duration)]
    pub retry_period: Duration,
}

/// Parses a duration: `10s`, `500ms`, `1m30s`, `90d` (humantime's units; a bare number is
/// seconds). Values past what the clock can represent are refused, not wrapped.
pub fn humantime_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("{text:?} is too large a number of seconds"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration such as 10s, 500ms, 1m30s or 90d: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::context::{
        DEFAULT_CLEANUP_TIMEOUT, DEFAULT_OPERAND_CERT_LIFETIME, DEFAULT_PVC_PENDING_GRACE,
    };
    use trustyai_webhooks::HttpsOptions;

    /// The duration flags are spelled for `--help` (`5m`, not `300s`); each must parse to the
    /// constant the library uses when no flag is involved.
    #[test]
    fn duration_defaults_are_the_library_defaults() {
        let cli = Cli::parse_from(["trustyai-operator", "run"]);
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        let lifetimes = trustyai_certs::Lifetimes::default();
        let certificates = &run.certificates;
        assert_eq!(certificates.ca_lifetime, lifetimes.ca);
        assert_eq!(certificates.operand_ca_lifetime, lifetimes.ca);
        assert_eq!(certificates.serving_cert_lifetime, lifetimes.serving);
        assert_eq!(certificates.ca_overlap, lifetimes.overlap);
        assert_eq!(
            certificates.operand_cert_lifetime,
            DEFAULT_OPERAND_CERT_LIFETIME
        );
        assert_eq!(run.cleanup_timeout, DEFAULT_CLEANUP_TIMEOUT);
        assert_eq!(run.pvc_pending_grace, DEFAULT_PVC_PENDING_GRACE);
        assert_eq!(run.drain_timeout, HttpsOptions::DEFAULT_DRAIN_TIMEOUT);
        let limits = &run.webhook_limits;
        assert_eq!(
            limits.webhook_queue_timeout,
            HttpsOptions::DEFAULT_QUEUE_TIMEOUT
        );
        assert_eq!(
            limits.webhook_idle_timeout,
            HttpsOptions::DEFAULT_IDLE_TIMEOUT
        );
        crate::leader_election::LeaderConfig {
            lease_name: run.names.lease_name.clone(),
            namespace: run.names.namespace.clone(),
            identity: "test".to_owned(),
            lease_duration: run.leader_election.lease_duration,
            renew_deadline: run.leader_election.renew_deadline,
            retry_period: run.leader_election.retry_period,
        }
        .validate()
        .expect("the default lease timings are consistent");
    }

    #[test]
    fn durations_parse_in_every_accepted_spelling() {
        assert_eq!(humantime_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(humantime_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(
            humantime_duration("90d"),
            Ok(Duration::from_secs(90 * 86_400))
        );
        assert_eq!(humantime_duration("15"), Ok(Duration::from_secs(15)));
        assert_eq!(humantime_duration("1h 5m"), Ok(Duration::from_secs(3_900)));
    }

    #[test]
    fn an_invalid_duration_is_refused_quoting_its_text() {
        for text in [
            "99999999999999999999999s",
            "18446744073709551615d",
            "99999999999999999999",
            "",
            "10 parsecs",
            "-5s",
        ] {
            let error = humantime_duration(text).expect_err(text);
            assert!(error.contains(&format!("{:?}", text.trim())), "{error}");
        }
    }
}
