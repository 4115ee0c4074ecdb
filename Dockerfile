# syntax=docker/dockerfile:1.7
# The operator image: one static-ish binary that runs the operator (`run`), the observer-agent
# sidecar (`agent`) and prints the CRD (`crd`).
#
#   docker build -t kafka-observer-operator:0.1.0 .
#
# Not built in this repository's CI (no container runtime there); `make build` produces the
# same binary natively.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
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
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
COPY --from=builder /out/kafka-observer-operator /usr/local/bin/kafka-observer-operator
# The chart's securityContext runs as 65532 with a read-only root filesystem.
USER 65532:65532
EXPOSE 8080 9180
ENTRYPOINT ["/usr/local/bin/kafka-observer-operator"]
CMD ["run"]
