#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! The reconcile loop through the real API server: the operator binary (webhooks included)
//! against the local control plane, where kube-controller-manager runs the Deployments and
//! the garbage collector, the PV binder binds claims, and kwok makes pods Ready.
//!
//! One operator serves the tests of this binary, each in namespaces of its own: it starts
//! with the first test that needs it and stops when the last one running is done (so it never
//! outlives the binary). Most tests share it (`Env::shared`); the tests that change something
//! cluster-wide (the operator ConfigMap, optional API CRDs) or restart the operator take it
//! exclusively (`Env::exclusive`), which waits for the shared users to finish. That lock plays
//! the role of `support::CLUSTER_WIDE` here: this binary has its own control plane, and no
//! other operator runs on it.

#[path = "../support/mod.rs"]
mod support;

mod database;
mod deletion;
mod drift;
mod env;
mod go_compat;
mod optional_apis;
mod pvc;
