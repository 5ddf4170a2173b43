# The two commands the README names: `make run` and `make test`.
SHELL := /bin/bash
CONTROL_PLANE_BIN := $(shell tests/control-plane/build.sh --print)
export TRUSTYAI_CONTROL_PLANE_BIN := $(CONTROL_PLANE_BIN)

.PHONY: test lint control-plane run crd

## Every test: builds the control plane if it is not cached, then the whole workspace's tests.
test: control-plane
	cargo test --workspace --all-targets --no-fail-fast

## fmt and clippy, as CI runs them.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

## Builds kube-apiserver, etcd, controller-manager, scheduler, kwok and helm into the cache.
control-plane:
	tests/control-plane/build.sh

## Regenerates the committed CRD and the chart's copy of it.
crd:
	cargo run -q -- crd > crds/trustyaiservices.yaml
	cp crds/trustyaiservices.yaml charts/trustyai-operator/files/trustyaiservices.yaml

## The operator on an embedded local control plane, with a sample TrustyAIService applied.
## `make run ARGS="--kubeconfig ~/.kube/config"` runs it against that cluster instead.
run: control-plane
	cargo build -p trustyai-operator -p trustyai-local-cluster --bins
	target/debug/trustyai-local-cluster --operator target/debug/trustyai-operator $(ARGS)
