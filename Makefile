# The two commands the README names: `make run` and `make test`.
SHELL := /bin/bash
CONTROL_PLANE_BIN := $(shell dev/control-plane/build.sh --print)
export TRUSTYAI_CONTROL_PLANE_BIN := $(CONTROL_PLANE_BIN)

.PHONY: test lint control-plane run crd bench prerequisites

## What the targets below need (cargo, kubectl; Go when the control plane is not cached yet).
prerequisites:
	@dev/local-cluster/scripts/prerequisites.sh

## Every test: builds the control plane if it is not cached, then the whole workspace's tests.
test: prerequisites control-plane
	cargo test --workspace --all-targets --no-fail-fast

## fmt, clippy, rustdoc, the dependency audit and the declared rust-version, as CI runs them.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
	.ci/cargo-deny.sh
	.ci/rust-version.sh

## Builds kube-apiserver, etcd, controller-manager, scheduler, kwok and helm into the cache.
control-plane:
	dev/control-plane/build.sh

## Regenerates the committed CRDs and the chart's copies of them.
crd:
	cargo run -q -- crd > crds/trustyaiservices.yaml
	cp crds/trustyaiservices.yaml charts/trustyai-operator/files/trustyaiservices.yaml
	cargo run -q -- crd --kind TrustyAIMetric > crds/trustyaimetrics.yaml
	cp crds/trustyaimetrics.yaml charts/trustyai-operator/files/trustyaimetrics.yaml

## The operator on an embedded local control plane, with a sample TrustyAIService applied.
## `make run ARGS="--kubeconfig ~/.kube/config"` runs it against that cluster instead;
## `--webhook-port`, `--ops-port` (defaults 9443, 9080) and `--operator-logs console` go in ARGS too.
run: prerequisites control-plane
	@echo "building the operator (cargo shows its progress)..." >&2
	cargo build -p trustyai-operator -p trustyai-local-cluster --bins
	target/debug/trustyai-local-cluster --operator target/debug/trustyai-operator $(ARGS)

## Benchmarks (README, Performance): criterion on the pure functions, the HTTPS webhooks under
## load, the operator against a local control plane (100 TrustyAIServices; more with
## `make bench BENCH_ARGS="--n 1000"`), start-up and binary size, and `/convert` beside the Go
## operator's (bench/go-conversion). Writes bench/results/latest.{json,md} and
## bench/results/side-by-side/.
bench: control-plane
	cargo build --release -p trustyai-operator -p trustyai-bench --bins
	cargo bench --profile release -p trustyai-bench --bench pure
	target/release/trustyai-bench --operator target/release/trustyai-operator --go-conversion $$(bench/go-conversion/build.sh) $(BENCH_ARGS)
