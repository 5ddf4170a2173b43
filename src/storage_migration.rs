//! Storage-version migration: re-writes every TrustyAIService so etcd holds it as `v1`, then
//! sets the CRD's `status.storedVersions` to `[v1]`. That is the step before a release may stop
//! serving `v1alpha1`: the API server refuses to drop a version from `spec.versions` while
//! `status.storedVersions` still lists it, and it never removes an entry by itself (the list is
//! history, not a census of live objects).
//!
//! # How an object is re-written
//!
//! Each object is read through `v1` and `replace`d with exactly what was read. The write goes
//! through the storage layer, which encodes the object in the CRD's storage version and compares
//! the bytes with what etcd holds: an object stored as `v1alpha1` differs (at least in its
//! `apiVersion`) and is written as `v1`; an object already stored as `v1` encodes to the same
//! bytes and the API server skips the write (its `resourceVersion` stays), which is how the
//! report tells "re-written" from "already v1". An empty merge patch would reach the same
//! storage code, but `replace` states the intent and carries the `resourceVersion` read, so a
//! concurrent change is never overwritten (optimistic concurrency: a conflict re-reads and
//! retries).
//!
//! The write passes the admission webhooks like any update: the mutating webhook fills in
//! defaults an object was created without (objects admitted by this operator have them all).
//!
//! # Safety while users keep writing
//!
//! The migration starts only when the CRD's storage version is `v1` and conversion goes through
//! the webhook, so any object written after that (created, updated, or re-written here) is
//! stored as `v1`. Objects created during the pass may be missed by the paginated list, but are
//! `v1` already; objects deleted during it are counted as gone. The list is paginated
//! (`limit`/`continue`) so memory stays bounded; an expired continue token restarts the list,
//! which is cheap because the objects done already are skipped by the API server. Running the
//! migration again is always safe: with `storedVersions == [v1]` it does nothing.
//!
//! # Reporting
//!
//! Progress is logged every [`Options::progress_every`] objects; the result is logged, returned
//! as a [`MigrationReport`], and published as an Event (reason [`EVENT_REASON`]) regarding the
//! CRD. Cluster-scoped objects' Events live in the `default` namespace:
//! `kubectl get events -n default --field-selector reason=StorageMigrated`.

use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{GroupVersionKind, TypeMeta};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};
use trustyai_crds::contract::{CRD_NAME, GROUP, KIND, PLURAL, STORAGE_VERSION};

use crate::cli::MigrateStorageArgs;

/// Field manager of the migration's writes (the re-writes and the CRD status patch).
pub const FIELD_MANAGER: &str = "trustyai-operator-storage-migration";
/// Reason of the Event published when the migration has re-written the objects and pruned
/// `status.storedVersions`.
pub const EVENT_REASON: &str = "StorageMigrated";
/// Reason of the Warning Event published when some objects could not be re-written.
pub const FAILURE_EVENT_REASON: &str = "StorageMigrationFailed";
/// Action of both Events.
pub const EVENT_ACTION: &str = "MigrateStorage";

/// How many times the operator tries the migration at start before giving up (until its next
/// start, or a manual `migrate-storage`).
pub const START_ATTEMPTS: u32 = 6;

/// Tuning of one migration run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Objects per list page (the API server's `limit`).
    pub page_size: u32,
    /// Objects re-written at the same time within a page.
    pub concurrency: usize,
    /// Log progress after every this many objects.
    pub progress_every: usize,
    /// Attempts per object (and for the CRD status patch) when the write conflicts.
    pub conflict_attempts: u32,
    /// How often an expired continue token may restart the list.
    pub list_restarts: u32,
    /// Pause between seeing `v1` as the CRD's storage version and the first write. Each API
    /// server switches its encoder when its own CRD informer delivers the change; a write
    /// reaching one that has not yet would store the old version while the migration counts it
    /// as done. The pause covers that propagation (milliseconds in practice), e.g. right after
    /// the operator applied the CRD.
    pub settle: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 100,
            concurrency: 4,
            progress_every: 100,
            conflict_attempts: 5,
            list_restarts: 3,
            settle: Duration::from_secs(2),
        }
    }
}

/// What a migration run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// `status.storedVersions` when the run started.
    pub stored_versions_before: Vec<String>,
    /// `status.storedVersions` when it ended.
    pub stored_versions_after: Vec<String>,
    /// Objects read through `v1` (an object seen again after a list restart counts again).
    pub examined: usize,
    /// Objects the API server wrote again (they were not stored as `v1`, or the mutating
    /// webhook added defaults).
    pub rewritten: usize,
    /// Objects whose write the API server skipped: already stored as `v1`, byte for byte.
    pub unchanged: usize,
    /// Objects deleted between the list and their write.
    pub gone: usize,
    /// Write conflicts (someone else wrote the object first), each re-read and retried.
    pub conflicts: usize,
    /// Times an expired continue token restarted the list.
    pub list_restarts: u32,
}

impl MigrationReport {
    /// Whether the run found nothing to do (`storedVersions` was `[v1]` already).
    pub fn nothing_to_do(&self) -> bool {
        !needs_migration(&self.stored_versions_before)
    }
}

impl fmt::Display for MigrationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nothing_to_do() {
            return write!(
                f,
                "status.storedVersions is {} already: nothing to migrate",
                list(&self.stored_versions_before)
            );
        }
        write!(
            f,
            "examined {} TrustyAIServices: {} re-written as {STORAGE_VERSION}, {} already stored as {STORAGE_VERSION}, {} deleted meanwhile",
            self.examined, self.rewritten, self.unchanged, self.gone
        )?;
        if self.conflicts > 0 {
            write!(f, ", {} write conflicts retried", self.conflicts)?;
        }
        if self.list_restarts > 0 {
            write!(f, ", list restarted {} times", self.list_restarts)?;
        }
        write!(
            f,
            "; status.storedVersions {} -> {}",
            list(&self.stored_versions_before),
            list(&self.stored_versions_after)
        )
    }
}

fn list(versions: &[String]) -> String {
    format!("[{}]", versions.join(", "))
}

/// Why a migration run stopped. Every error leaves `status.storedVersions` as it was, so the
/// run can simply be repeated.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("reading CRD {CRD_NAME}")]
    ReadCrd(#[source] kube::Error),
    #[error(
        "CRD {CRD_NAME} does not exist: apply it (or start the operator, which applies it) first"
    )]
    CrdMissing,
    #[error(
        "CRD {CRD_NAME} stores {found} (spec.versions[].storage), not {STORAGE_VERSION}: apply the current CRD first, or the objects would be stored in the old version again"
    )]
    StorageNotV1 {
        /// The storage version found (`none` when no version is marked).
        found: String,
    },
    #[error(
        "CRD {CRD_NAME} converts with strategy {found}, not Webhook: the operator has not published its conversion webhook yet, and re-writing objects without it would skip the conversion"
    )]
    ConversionNotWebhook {
        /// `spec.conversion.strategy` found (`None` when unset).
        found: String,
    },
    #[error(
        "listing TrustyAIServices through {STORAGE_VERSION} (is the conversion webhook reachable?)"
    )]
    List(#[source] kube::Error),
    #[error(
        "the list's continue token expired {0} times in a row; the migration is resumable: run it again"
    )]
    ListExpired(u32),
    #[error(
        "{failed} of {examined} TrustyAIServices could not be re-written as {STORAGE_VERSION}, so status.storedVersions was left as it is; first failures: {first}"
    )]
    Incomplete {
        /// Objects that could not be re-written.
        failed: usize,
        /// Objects examined.
        examined: usize,
        /// The first few failures, `namespace/name: reason`, separated by `; `.
        first: String,
    },
    #[error("setting status.storedVersions of CRD {CRD_NAME} to [{STORAGE_VERSION}]")]
    Prune(#[source] kube::Error),
    #[error(
        "setting status.storedVersions of CRD {CRD_NAME}: still conflicting after {0} attempts"
    )]
    PruneConflicts(u32),
}

/// Whether `stored_versions` lists anything but `v1`, i.e. etcd may hold objects in another
/// version. An empty list (never written by an API server) needs nothing.
pub fn needs_migration(stored_versions: &[String]) -> bool {
    stored_versions.iter().any(|v| v != STORAGE_VERSION)
}

/// The CRD's `status.storedVersions` (empty when there is no status yet).
pub fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default()
}

/// Checks that re-writing now stores `v1` through the conversion webhook: the version marked
/// `storage` is `v1` and `spec.conversion.strategy` is `Webhook`.
pub fn check_ready(crd: &CustomResourceDefinition) -> Result<(), MigrationError> {
    let storage: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    if storage != [STORAGE_VERSION] {
        let found = if storage.is_empty() {
            "none".to_owned()
        } else {
            storage.join(", ")
        };
        return Err(MigrationError::StorageNotV1 { found });
    }
    let strategy = crd
        .spec
        .conversion
        .as_ref()
        .map(|c| c.strategy.as_str())
        .unwrap_or("None");
    if strategy != "Webhook" {
        return Err(MigrationError::ConversionNotWebhook {
            found: strategy.to_owned(),
        });
    }
    Ok(())
}

/// The merge patch of the CRD's status subresource that sets `storedVersions` to `[v1]`,
/// conditional on the CRD still being at `resource_version` (the storage version checked on
/// that very object cannot have changed under the patch).
pub fn stored_versions_patch(resource_version: &str) -> Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "status": {"storedVersions": [STORAGE_VERSION]},
    })
}

/// Delays between the start-up attempts: 2 s, doubling, at most 60 s; one fewer than
/// [`START_ATTEMPTS`].
pub fn start_delays() -> impl Iterator<Item = Duration> {
    (0..START_ATTEMPTS.saturating_sub(1))
        .map(|i| Duration::from_secs(2u64.saturating_mul(1 << i.min(5)).min(60)))
}

/// Runs the migration with the default [`Options`].
pub async fn migrate(client: &Client) -> Result<MigrationReport, MigrationError> {
    migrate_with(client, &Options::default()).await
}

/// Runs the migration: nothing when `status.storedVersions` is `[v1]`; otherwise re-writes every
/// TrustyAIService through `v1`, then sets `status.storedVersions` to `[v1]`, logs and publishes
/// an Event. See the module documentation.
#[tracing::instrument(name = "storage_migration", skip_all)]
pub async fn migrate_with(
    client: &Client,
    options: &Options,
) -> Result<MigrationReport, MigrationError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get_opt(CRD_NAME)
        .await
        .map_err(MigrationError::ReadCrd)?
        .ok_or(MigrationError::CrdMissing)?;
    let mut report = MigrationReport {
        stored_versions_before: stored_versions(&crd),
        ..MigrationReport::default()
    };
    if !needs_migration(&report.stored_versions_before) {
        report.stored_versions_after = report.stored_versions_before.clone();
        tracing::info!(stored_versions = ?report.stored_versions_before, "storage migration: nothing to do");
        return Ok(report);
    }
    check_ready(&crd)?;
    tracing::info!(
        stored_versions = ?report.stored_versions_before,
        "storage migration: re-writing every TrustyAIService as {STORAGE_VERSION}"
    );
    tokio::time::sleep(options.settle).await;

    let failures = rewrite_all(client, options, &mut report).await?;
    let recorder = recorder(client);
    if !failures.is_empty() {
        let error = MigrationError::Incomplete {
            failed: failures.len(),
            examined: report.examined,
            first: failures
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
        };
        publish(
            &recorder,
            &crd,
            EventType::Warning,
            FAILURE_EVENT_REASON,
            &crate::error_chain::chain_text(&error),
        )
        .await;
        return Err(error);
    }

    report.stored_versions_after = prune_stored_versions(&crds, options).await?;
    tracing::info!(
        examined = report.examined,
        rewritten = report.rewritten,
        unchanged = report.unchanged,
        gone = report.gone,
        conflicts = report.conflicts,
        "storage migration done: {report}"
    );
    publish(
        &recorder,
        &crd,
        EventType::Normal,
        EVENT_REASON,
        &report.to_string(),
    )
    .await;
    Ok(report)
}

/// The outcome of re-writing one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rewrite {
    Rewritten,
    Unchanged,
    Gone,
}

/// One object's outcome and the conflicts met on the way.
type RewriteResult = Result<(Rewrite, usize), kube::Error>;

/// Re-writes every object, page by page; returns the failures (`namespace/name: reason`).
async fn rewrite_all(
    client: &Client,
    options: &Options,
    report: &mut MigrationReport,
) -> Result<Vec<String>, MigrationError> {
    let resource = v1_resource();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut failures = Vec::new();
    let mut continue_token: Option<String> = None;
    let mut restarts_in_a_row = 0;
    let mut next_progress = options.progress_every.max(1);
    loop {
        let mut params = ListParams::default().limit(options.page_size);
        if let Some(token) = &continue_token {
            params = params.continue_token(token);
        }
        let page = match all.list(&params).await {
            Ok(page) => page,
            Err(e) if continue_token.is_some() && status_code(&e) == Some(410) => {
                // The token outlived etcd's compaction. Objects done already are skipped by the
                // API server, so starting over costs reads only.
                restarts_in_a_row += 1;
                report.list_restarts += 1;
                if restarts_in_a_row > options.list_restarts {
                    return Err(MigrationError::ListExpired(restarts_in_a_row));
                }
                tracing::warn!(
                    restarts = report.list_restarts,
                    "the list's continue token expired; listing again from the start"
                );
                continue_token = None;
                continue;
            }
            Err(e) => return Err(MigrationError::List(e)),
        };
        restarts_in_a_row = 0;
        tracing::debug!(objects = page.items.len(), "storage migration: page listed");
        let results: Vec<(String, RewriteResult)> = futures::stream::iter(page.items)
            .map(|object| {
                let client = client.clone();
                let resource = resource.clone();
                async move {
                    let id = describe(&object);
                    (id, rewrite_one(client, &resource, object, options).await)
                }
            })
            .buffer_unordered(options.concurrency.max(1))
            .collect()
            .await;
        for (id, result) in results {
            report.examined += 1;
            match result {
                Ok((outcome, conflicts)) => {
                    report.conflicts += conflicts;
                    match outcome {
                        Rewrite::Rewritten => report.rewritten += 1,
                        Rewrite::Unchanged => report.unchanged += 1,
                        Rewrite::Gone => report.gone += 1,
                    }
                }
                Err(error) => {
                    tracing::warn!(object = %id, error = %crate::error_chain::Chain(&error), "could not re-write the object");
                    failures.push(format!("{id}: {}", crate::error_chain::Chain(&error)));
                }
            }
        }
        if report.examined >= next_progress {
            tracing::info!(
                examined = report.examined,
                rewritten = report.rewritten,
                unchanged = report.unchanged,
                gone = report.gone,
                failed = failures.len(),
                "storage migration progress"
            );
            while next_progress <= report.examined {
                next_progress += options.progress_every.max(1);
            }
        }
        continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            return Ok(failures);
        }
    }
}

/// Writes `object` back unchanged through `v1`; on a conflict re-reads it and tries again.
/// Returns the outcome and the number of conflicts met.
async fn rewrite_one(
    client: Client,
    resource: &ApiResource,
    mut object: DynamicObject,
    options: &Options,
) -> RewriteResult {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(namespace) => Api::namespaced_with(client, namespace, resource),
        None => Api::all_with(client, resource),
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut conflicts = 0;
    loop {
        // List items may come without their own apiVersion/kind; the body needs them.
        object.types = Some(TypeMeta {
            api_version: format!("{GROUP}/{STORAGE_VERSION}"),
            kind: KIND.to_owned(),
        });
        let read_at = object.metadata.resource_version.clone();
        match api.replace(&name, &params, &object).await {
            Ok(written) if written.metadata.resource_version == read_at => {
                return Ok((Rewrite::Unchanged, conflicts));
            }
            Ok(_) => return Ok((Rewrite::Rewritten, conflicts)),
            Err(e) if status_code(&e) == Some(404) => return Ok((Rewrite::Gone, conflicts)),
            Err(e) if status_code(&e) == Some(409) => {
                conflicts += 1;
                if conflicts >= options.conflict_attempts as usize {
                    return Err(e);
                }
                // Someone else wrote it: re-read and write that version back.
                match api.get_opt(&name).await? {
                    Some(fresh) => object = fresh,
                    None => return Ok((Rewrite::Gone, conflicts)),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sets `status.storedVersions` to `[v1]`, re-checking the storage version on the object it
/// patches; returns the resulting list.
async fn prune_stored_versions(
    crds: &Api<CustomResourceDefinition>,
    options: &Options,
) -> Result<Vec<String>, MigrationError> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    for _ in 0..options.conflict_attempts.max(1) {
        let crd = crds
            .get_opt(CRD_NAME)
            .await
            .map_err(MigrationError::ReadCrd)?
            .ok_or(MigrationError::CrdMissing)?;
        if !needs_migration(&stored_versions(&crd)) {
            return Ok(stored_versions(&crd));
        }
        check_ready(&crd)?;
        let resource_version = crd.metadata.resource_version.clone().unwrap_or_default();
        match crds
            .patch_status(
                CRD_NAME,
                &params,
                &Patch::Merge(stored_versions_patch(&resource_version)),
            )
            .await
        {
            Ok(patched) => return Ok(stored_versions(&patched)),
            // The CRD changed since it was read (the caBundle publisher writes it too).
            Err(e) if status_code(&e) == Some(409) => continue,
            Err(e) => return Err(MigrationError::Prune(e)),
        }
    }
    Err(MigrationError::PruneConflicts(options.conflict_attempts))
}

/// The `v1` TrustyAIService resource.
fn v1_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, STORAGE_VERSION, KIND), PLURAL)
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// `namespace/name`, for logs and failure lists.
fn describe(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or(""),
        object.metadata.name.as_deref().unwrap_or("")
    )
}

fn recorder(client: &Client) -> Recorder {
    let reporter = Reporter {
        controller: "trustyai-operator".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    Recorder::new(client.clone(), reporter)
}

/// Publishes an Event regarding the CRD. Events are advisory: a failure is logged, not returned.
async fn publish(
    recorder: &Recorder,
    crd: &CustomResourceDefinition,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        // The Events API caps the note at 1 kB.
        note: Some(note.chars().take(1000).collect()),
        action: EVENT_ACTION.to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &crd.object_ref(&())).await {
        tracing::warn!(error = %crate::error_chain::Chain(&error), reason, "could not publish the storage migration event");
    }
}

/// The operator's start-up migration: [`migrate`], retried with backoff ([`start_delays`]) while
/// it fails (typically because the conversion webhook is not reachable yet), then given up with
/// an error log. Never fails the process: objects stay readable either way, only dropping
/// `v1alpha1` from the CRD waits for the migration.
pub async fn migrate_at_start(client: Client) {
    let mut delays = start_delays();
    for attempt in 1..=START_ATTEMPTS {
        let error = match migrate(&client).await {
            Ok(_) => return,
            Err(error) => error,
        };
        match delays.next() {
            Some(delay) => {
                tracing::warn!(attempt, error = %crate::error_chain::Chain(&error), retry_in = ?delay, "storage migration failed; retrying");
                tokio::time::sleep(delay).await;
            }
            None => {
                tracing::error!(
                    attempt,
                    error = %crate::error_chain::Chain(&error),
                    "storage migration failed; giving up until the next start (or run `trustyai-operator migrate-storage`)"
                );
            }
        }
    }
}

/// Runs `migrate-storage`: prints the report on stdout and exits 0, or prints the error on
/// stderr and exits 1.
pub async fn run_cli(args: &MigrateStorageArgs) -> ExitCode {
    let Some(client) = crate::kube_client::client_or_report(args.kubeconfig.as_deref()).await
    else {
        return ExitCode::FAILURE;
    };
    match migrate(&client).await {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: storage migration failed: {}",
                crate::error_chain::Chain(&e)
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion;

    fn versions(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn crd_with(storage: &str, strategy: Option<&str>) -> CustomResourceDefinition {
        let mut crd = trustyai_crds::crd::crd().unwrap_or_else(|e| panic!("{e}"));
        for version in &mut crd.spec.versions {
            version.storage = version.name == storage;
        }
        crd.spec.conversion = strategy.map(|s| CustomResourceConversion {
            strategy: s.into(),
            webhook: None,
        });
        crd
    }

    #[test]
    fn only_a_list_of_v1_alone_needs_nothing() {
        assert!(!needs_migration(&versions(&["v1"])));
        assert!(!needs_migration(&versions(&[])));
        assert!(needs_migration(&versions(&["v1alpha1", "v1"])));
        assert!(needs_migration(&versions(&["v1", "v1alpha1"])));
        assert!(needs_migration(&versions(&["v1alpha1"])));
    }

    #[test]
    fn the_committed_crd_is_ready() {
        let crd = trustyai_crds::crd::crd().unwrap_or_else(|e| panic!("{e}"));
        assert!(check_ready(&crd).is_ok());
    }

    #[test]
    fn an_old_storage_version_is_refused() {
        let err = check_ready(&crd_with("v1alpha1", Some("Webhook"))).expect_err("refused");
        assert!(
            matches!(&err, MigrationError::StorageNotV1 { found } if found == "v1alpha1"),
            "{err}"
        );
        let err = check_ready(&crd_with("none", Some("Webhook"))).expect_err("refused");
        assert!(
            matches!(&err, MigrationError::StorageNotV1 { found } if found == "none"),
            "{err}"
        );
    }

    #[test]
    fn conversion_without_the_webhook_is_refused() {
        for strategy in [None, Some("None")] {
            let err = check_ready(&crd_with("v1", strategy)).expect_err("refused");
            assert!(
                matches!(&err, MigrationError::ConversionNotWebhook { found } if found == "None"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_status_patch_is_a_conditional_replacement_of_stored_versions() {
        assert_eq!(
            stored_versions_patch("42"),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"storedVersions": ["v1"]}})
        );
    }

    #[test]
    fn stored_versions_of_a_crd_without_status_are_empty() {
        let crd = crd_with("v1", Some("Webhook"));
        assert!(stored_versions(&crd).is_empty());
    }

    #[test]
    fn start_up_backoff_doubles_over_a_fixed_number_of_attempts() {
        let delays: Vec<u64> = start_delays().map(|d| d.as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32]);
        assert_eq!(delays.len() as u32, START_ATTEMPTS - 1);
    }

    #[test]
    fn the_report_says_what_was_done() {
        let report = MigrationReport {
            stored_versions_before: versions(&["v1alpha1", "v1"]),
            stored_versions_after: versions(&["v1"]),
            examined: 15,
            rewritten: 12,
            unchanged: 2,
            gone: 1,
            conflicts: 3,
            list_restarts: 0,
        };
        assert!(!report.nothing_to_do());
        assert_eq!(
            report.to_string(),
            "examined 15 TrustyAIServices: 12 re-written as v1, 2 already stored as v1, 1 deleted meanwhile, 3 write conflicts retried; status.storedVersions [v1alpha1, v1] -> [v1]"
        );
        let idle = MigrationReport {
            stored_versions_before: versions(&["v1"]),
            stored_versions_after: versions(&["v1"]),
            ..MigrationReport::default()
        };
        assert!(idle.nothing_to_do());
        assert_eq!(
            idle.to_string(),
            "status.storedVersions is [v1] already: nothing to migrate"
        );
    }

    #[test]
    fn incomplete_runs_name_the_failures() {
        let err = MigrationError::Incomplete {
            failed: 1,
            examined: 3,
            first: "ns/a: denied".into(),
        };
        let text = err.to_string();
        assert!(
            text.starts_with("1 of 3 TrustyAIServices could not be re-written as v1")
                && text.ends_with("first failures: ns/a: denied"),
            "{text}"
        );
    }
}
