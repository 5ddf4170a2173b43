//! Conversion between v1alpha1 and v1: fixtures (the Go operator's samples and objects, odd
//! stored objects, ConversionReviews good and bad, golden outputs) and properties over thousands
//! of generated objects (round trips are identities, conversion never fails, output is
//! deterministic).
//!
//! Golden files (`*.expected-*.json`) are rewritten by running with `TRUSTYAI_BLESS=1`; review the
//! diff before committing.

// Helpers shared by the tests panic on purpose: a failed expectation is a failed test.
#![allow(clippy::expect_used)]

mod edits;
mod fixtures;
mod generators;
mod properties;
mod support;
mod text;
