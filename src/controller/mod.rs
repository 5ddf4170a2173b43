//! The reconcile loop (being written).
