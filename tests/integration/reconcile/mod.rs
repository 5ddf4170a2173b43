//! The reconcile loop through the real API server: the operator binary (webhooks included)
//! against the local control plane, where kube-controller-manager runs the Deployments and
//! the garbage collector, the PV binder binds claims, and kwok makes pods Ready.
//!
//! One operator serves the tests of this module, each in namespaces of its own: it starts
//! with the first test that needs it and stops when the last one running is done (so it never
//! outlives the tests). Most tests share it (`Env::shared`, a shared hold on this concern's
//! control plane); the tests that change something cluster-wide (the operator ConfigMap,
//! optional API CRDs) or restart the operator take it exclusively (`Env::exclusive`), which
//! waits for the shared users to finish. No other operator runs on this control plane.

mod database;
mod deletion;
mod drift;
mod env;
mod go_compat;
mod image_upgrade;
mod optional_apis;
mod pvc;
