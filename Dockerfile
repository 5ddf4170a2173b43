# The operator image: a static musl build on a distroless, non-root runtime.
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y --no-install-recommends musl-tools
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl --bin trustyai-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/trustyai-operator /trustyai-operator
# The Go operator's Deployment runs `/manager` with its own flags (see src/go_flags.rs): the same
# binary under that name lets an admin swap the image under it unchanged.
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/trustyai-operator /manager
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/trustyai-operator"]
CMD ["run"]
