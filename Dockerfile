# syntax=docker/dockerfile:1.7
# The operator image: one static-ish binary that runs the operator (`run`), the observer-agent
# sidecar (`agent`) and prints the CRD (`crd`).
#
#   docker build -t kafka-observer-operator:0.1.0 .          # full build: compiles in rust:1.95
#
# Prebuilt variant: the runtime stage with a binary already built on the host (`make build`),
# no Rust toolchain in the image. The context needs only this Dockerfile and the binary, named
# `kafka-observer-operator`:
#
#   cp $CARGO_TARGET_DIR/release/kafka-observer-operator ctx/ && cp Dockerfile ctx/
#   docker build --target prebuilt -t kafka-observer-operator:dev ctx/
#
# The base images are build args (defaults: the public images), so a machine without registry
# access passes local ones; e2e/build/images.sh (buildah) builds the prebuilt target with
# RUNTIME_IMAGE=localhost/koo-debian:bookworm-slim, and `images.sh operator-full` the full build
# with BUILDER_IMAGE=localhost/koo-rust:1.95-bookworm.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
ARG BUILDER_IMAGE=rust:${RUST_VERSION}-${DEBIAN_RELEASE}
ARG RUNTIME_IMAGE=debian:${DEBIAN_RELEASE}-slim

FROM ${BUILDER_IMAGE} AS builder
# librdkafka is compiled from source by rdkafka-sys's build script, with OpenSSL and zlib.
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake pkg-config libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# The whole workspace (every member's manifest must resolve); .dockerignore drops target/ and
# the test bed's run state.
COPY . .
# Cache mounts keep the registry and the compiled dependencies between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/target \
    cargo build --release --locked --bin kafka-observer-operator \
 && install -D target/release/kafka-observer-operator /out/kafka-observer-operator

# The binary links OpenSSL and zlib dynamically (librdkafka's TLS and compression); the slim
# image has exactly those plus CA certificates. No compilers, no package cache.
FROM ${RUNTIME_IMAGE} AS runtime-base
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
# The chart's securityContext runs as 65532 with a read-only root filesystem.
EXPOSE 8080 9180
ENTRYPOINT ["/usr/local/bin/kafka-observer-operator"]
CMD ["run"]

# `--target prebuilt`: the host's binary from the build context.
FROM runtime-base AS prebuilt
COPY kafka-observer-operator /usr/local/bin/kafka-observer-operator
USER 65532:65532

# The default (last) target: the binary compiled in the builder stage.
FROM runtime-base AS runtime
COPY --from=builder /out/kafka-observer-operator /usr/local/bin/kafka-observer-operator
USER 65532:65532
