//! The control plane each concern's tests run on, one concern at a time.
//!
//! A concern (one module of this binary: admission, conversion, the Helm chart, ...) gets a
//! control plane of its own. Its tests replace what is cluster-wide (the CRD, its conversion
//! webhook, the webhook registrations, the operator ConfigMap, optional API CRDs) and expect to
//! find it as their own earlier steps left it, so two concerns never share one. Only one runs at
//! a time, too: a 2-core machine runs one control plane and its operators well, not three. It
//! starts when the first test of its concern asks, and stops when a test of another concern asks
//! while none of its own holds it. libtest starts tests in name order, so the tests of a concern
//! come together and a concern normally starts one control plane.
//!
//! Within a concern, a test takes the control plane [`shared`] when it works in namespaces of
//! its own beside the others, or [`exclusive`] when it changes something cluster-wide or runs an
//! operator that does (an operator publishes its CA bundle into the CRD and the registrations).
//!
//! Taking a claim blocks the calling thread until it is granted. Every test has a thread (and,
//! with `#[tokio::test]`, a runtime) of its own, so a test waiting for its turn holds up no other.

use std::sync::{Condvar, Mutex, MutexGuard};

use trustyai_local_cluster::{ControlPlane, NodeKind, Options};

/// The groups of tests that each get a control plane of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concern {
    /// `admission`: the admission webhooks through the API server.
    Admission,
    /// `control_plane`: the CRD's schema and CEL rules, and the harness itself.
    ControlPlane,
    /// `conversion`: the conversion webhook and storage-version migration.
    Conversion,
    /// `graceful_stop`: SIGTERM at many points of the operator's life.
    GracefulStop,
    /// `host_footprint`: what the control planes leave on the host.
    HostFootprint,
    /// `helm_chart`: installing, upgrading and uninstalling the chart.
    HelmChart,
    /// `helm_rbac`: the chart's RBAC is enough for the operator.
    HelmRbac,
    /// `leader_election`: several replicas, one leader.
    LeaderElection,
    /// `operand_ca_rotation`: the operands' CA rotated under running clients.
    OperandCaRotation,
    /// `operations`: signals, health, metrics, restarts, budgets.
    Operations,
    /// `real_node`: pods that really run, from images made here, on a real kubelet.
    RealNode,
    /// `reconcile`: the reconcile loop with one operator shared by its tests.
    Reconcile,
    /// `webhook_tls`: the webhook server's certificate, its rotation and other sources.
    WebhookTls,
}

impl Concern {
    /// The node its control plane gets: a real one where pods must really run, else kwok's.
    fn node(self) -> NodeKind {
        match self {
            Concern::RealNode => NodeKind::Real,
            _ => NodeKind::Simulated,
        }
    }
}

/// The control plane of the concern whose tests hold it, and how many do.
struct Current {
    concern: Concern,
    cp: &'static ControlPlane,
    shared: usize,
    exclusive: bool,
}

static CURRENT: Mutex<Option<Current>> = Mutex::new(None);
static RELEASED: Condvar = Condvar::new();

fn current() -> MutexGuard<'static, Option<Current>> {
    // A test that panicked while holding the lock left consistent data: the counts change in
    // single statements.
    CURRENT.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's hold on its concern's control plane; dropping it lets the others in.
pub struct Claim {
    cp: &'static ControlPlane,
    exclusive: bool,
}

impl Claim {
    /// The control plane. It stays up as long as this claim is held.
    pub fn control_plane(&self) -> &'static ControlPlane {
        self.cp
    }
}

/// The control plane of `concern`, beside the other shared holders of the same concern.
pub fn shared(concern: Concern) -> Claim {
    claim(concern, false)
}

/// The control plane of `concern`, for this test alone.
pub fn exclusive(concern: Concern) -> Claim {
    claim(concern, true)
}

/// What most tests start from: their claim on the concern's control plane (held for as long as
/// it is kept: `let (_claim, cp, client, ns) = …`), the control plane, a client, and a new
/// namespace of their own.
pub type Start = (Claim, &'static ControlPlane, kube::Client, String);

/// [`exclusive`], with a client and a new namespace `prefix-…`.
pub async fn exclusive_namespace(concern: Concern, prefix: &str) -> Start {
    with_namespace(exclusive(concern), prefix).await
}

/// [`shared`], with a client and a new namespace `prefix-…`.
pub async fn shared_namespace(concern: Concern, prefix: &str) -> Start {
    with_namespace(shared(concern), prefix).await
}

async fn with_namespace(claim: Claim, prefix: &str) -> Start {
    let cp = claim.control_plane();
    let client = cp.client().await;
    let ns = cp.namespace(&client, prefix).await;
    (claim, cp, client, ns)
}

fn claim(concern: Concern, exclusive: bool) -> Claim {
    // Before the first control plane starts: what the host looked like.
    crate::support::host_footprint::before_any_control_plane();
    let mut slot = current();
    loop {
        match slot.as_mut() {
            Some(held) if held.concern == concern => {
                if !held.exclusive && (!exclusive || held.shared == 0) {
                    if exclusive {
                        held.exclusive = true;
                    } else {
                        held.shared += 1;
                    }
                    return Claim {
                        cp: held.cp,
                        exclusive,
                    };
                }
            }
            Some(idle) if idle.shared == 0 && !idle.exclusive => {
                eprintln!(
                    "stopping the control plane of {:?} for {concern:?}",
                    idle.concern
                );
                idle.cp.stop();
                *slot = None;
                continue;
            }
            Some(_) => {}
            None => {
                // Start it on a thread of its own: the caller may be inside a Tokio runtime, and
                // the readiness checks use one of their own. The lock stays held meanwhile: every
                // other test waits for this control plane or for the end of this concern anyway.
                let options = Options {
                    node: concern.node(),
                    ..Options::default()
                };
                let started = std::thread::spawn(move || ControlPlane::start_with(options))
                    .join()
                    .unwrap_or_else(|_| Err("the control-plane start thread panicked".into()));
                match started {
                    Ok(cp) => {
                        eprintln!("control plane for {concern:?} at {}", cp.server);
                        *slot = Some(Current {
                            concern,
                            cp: Box::leak(Box::new(cp)),
                            shared: 0,
                            exclusive: false,
                        });
                        continue;
                    }
                    Err(e) => {
                        drop(slot);
                        panic!("local control plane unavailable: {e}");
                    }
                }
            }
        }
        slot = RELEASED.wait(slot).unwrap_or_else(|e| e.into_inner());
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut slot = current();
        if let Some(held) = slot.as_mut()
            && std::ptr::eq(held.cp, self.cp)
        {
            if self.exclusive {
                held.exclusive = false;
            } else {
                held.shared = held.shared.saturating_sub(1);
            }
        }
        drop(slot);
        RELEASED.notify_all();
    }
}
