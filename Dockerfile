# The operator image: a static glibc build (crt-static) on an empty, non-root runtime.
# `trustyai-local-cluster`'s image builder (dev/local-cluster/src/images/operator.rs) reads this
# file: it runs the build stage's last RUN in the repository and assembles the final stage.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target x86_64-unknown-linux-gnu --bin trustyai-operator

FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/trustyai-operator /trustyai-operator
# The Go operator's Deployment runs `/manager` with its own flags (see src/go_flags.rs): the same
# binary under that name lets an admin swap the image under it unchanged.
COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/trustyai-operator /manager
USER 65532:65532
EXPOSE 8443 8080
LABEL org.opencontainers.image.title="trustyai-operator" \
      org.opencontainers.image.description="Kubernetes operator for the TrustyAI Service" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/trustyai-explainability/trustyai-operator"
ENTRYPOINT ["/trustyai-operator"]
CMD ["run"]
