//! The pure functions on the webhook path: defaulting and validation of one TrustyAIService,
//! and conversion reviews of 1, 100 and 1,000 objects each way, through the review converter
//! the webhook serves (`trustyai_webhooks::conversion::convert_review`, body bytes in, answer
//! bytes out). `make bench` runs these with
//! short measurement times; `cargo bench -p trustyai-bench --bench pure` runs them alone.

#![allow(clippy::expect_used)] // a benchmark harness: a broken fixture should stop it loudly

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trustyai_bench::fixtures::{self, V1, V1ALPHA1};
use trustyai_crds::defaults::{Operation, defaulted, defaults_patch};
use trustyai_crds::validation::{ValidationContext, validate};
use trustyai_webhooks::conversion::{ConvertedReview, convert_review};

fn admission(c: &mut Criterion) {
    let prefixes = fixtures::allowed_image_prefixes();
    let mut group = c.benchmark_group("admission");
    for (name, object) in [
        ("typical", fixtures::typical()),
        ("maximal", fixtures::maximal()),
    ] {
        group.bench_function(format!("defaults_patch/{name}"), |b| {
            b.iter(|| defaults_patch(black_box(&object), Operation::Create))
        });
        let full = defaulted(&object, Operation::Create);
        let exists = |_: &str| true;
        let ctx = ValidationContext {
            allowed_image_prefixes: prefixes.clone(),
            secret_exists: Some(&exists),
        };
        // The fixtures are valid: the benchmark measures the accepting path.
        let verdict = validate(&full, None, &ctx);
        assert!(verdict.is_allowed(), "{name}: {:?}", verdict.errors);
        group.bench_function(format!("validate/{name}"), |b| {
            b.iter(|| validate(black_box(&full), None, &ctx))
        });
    }
    group.finish();
}

fn conversion(c: &mut Criterion) {
    let mut group = c.benchmark_group("convert_review");
    for (direction, desired) in [("to_v1", V1), ("to_v1alpha1", V1ALPHA1)] {
        for n in [1usize, 100, 1000] {
            let body = serde_json::to_vec(&fixtures::conversion_review(n, desired))
                .expect("a ConversionReview");
            assert!(
                matches!(convert_review(&body), ConvertedReview::Converted { objects, .. } if objects == n),
                "{direction}/{n} converts"
            );
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(format!("{direction}/{n}"), |b| {
                b.iter(|| convert_review(black_box(&body)))
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = admission, conversion }
criterion_main!(benches);
