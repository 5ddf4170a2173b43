#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! Admission rules as tables: defaulting (minimal patches), validation on CREATE and UPDATE,
//! ratcheting of objects stored under older rules, warnings, and denial messages.

mod create;
mod defaulting;
mod properties;
mod ratcheting;
mod support;
mod update;
mod warnings;
