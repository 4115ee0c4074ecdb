# Entry points for humans and CI. Scripts live under e2e/; versions in e2e/versions.env.
SHELL := /bin/bash
export KOO_CACHE ?= $(HOME)/.cache/kafka-observer-operator
export CARGO_TARGET_DIR ?= $(KOO_CACHE)/target
# Incremental release builds: every clone gives this crate's files new times, so cargo rebuilds it
# whole (5 min 37 s here, lib and test harnesses at opt-level 3); incremental reuses the code of
# what did not change (a session's diff rebuilt in 3 min 8 s, nothing changed 9 s). The target
# directory's incremental state of other checkouts is pruned after 3 days (`build`).
export CARGO_INCREMENTAL ?= 1
export KOO_TESTBED ?= $(CURDIR)/.testbed
CARGO ?= cargo

.PHONY: all build check deny shellcheck docs-check unit test demo testbed-up testbed-down testbed-status k8s-binaries \
        kafka-jars kafka-patched kafka-versions patch-unit secure-kafka-test drills-kafka drills soak bench bench-watch bench-kafka bench-promotion bench-operator bench-policy bench-node bench-status crds crds-check fmt clippy \
        node-packages node-tools images image alerts-check promtool builds-beside builds-beside-wait

all: build

# KOO_BUILD_TESTS=1 (set by `make test`) selects the test targets too: cargo then resolves the
# dev-dependencies' features (tokio's test-util, ...) for the binaries as well, so they are the
# very artifacts `cargo test --release` uses and CI compiles the crate once instead of twice.
build:
	find "$(CARGO_TARGET_DIR)/release/incremental" -mindepth 1 -maxdepth 1 -mtime +3 -exec rm -rf {} + 2>/dev/null || true
	$(CARGO) build --workspace --release --bins $(if $(KOO_BUILD_TESTS),--tests)

## The main job: local test bed, operator, example ObserverSet and a failure drill.
demo: build kafka-patched
	bash e2e/demo.sh

## All the tests: static checks, unit and property tests, then everything against the real bed.
# The bed's Go builds run beside the cargo stages (e2e/build/beside.sh), waited for before the bed.
test: export KOO_BUILD_TESTS = 1
test: builds-beside check unit patch-unit alerts-check builds-beside-wait testbed-up
	KOO_KAFKA_VERSIONS_BESIDE=1 bash e2e/integration.sh

check: fmt clippy crds-check shellcheck docs-check deny

# The dependency policy of deny.toml: licences, bans (duplicate versions included) and sources,
# with cargo-deny built once into $(KOO_CACHE) (e2e/build/cargo-deny.sh, a few minutes the first
# time). Not the advisories: their database cannot be fetched here (deny.toml says why).
deny:
	deny_bin="$$(bash e2e/build/cargo-deny.sh)" && "$$deny_bin" --locked check licenses bans sources

# Every bash script with shellcheck, its masked-return check (SC2312) on: each finding fixed or
# justified in place (e2e/shellcheck.sh).
shellcheck:
	bash e2e/shellcheck.sh

# Every relative link of the Markdown files resolves, and every `make <target>` the docs name
# exists (e2e/docs-check.sh).
docs-check:
	bash e2e/docs-check.sh

builds-beside:
	bash e2e/build/beside.sh start

builds-beside-wait:
	bash e2e/build/beside.sh wait

fmt:
	$(CARGO) fmt --all -- --check

# --release: the same profile as `build` and `unit`, so build scripts (librdkafka's C build
# included) and proc-macros are compiled once for all three, not once more in the dev profile.
clippy:
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

# --release: the bed tests build in release too, so a cold run compiles the dependencies once.
# The examples (the benchmarks) are not built here: clippy checks them, `make bench` builds them.
# First, in about a second: images/recipes/'s build-time class path check against stand-in layouts;
# then the drills' accounting and e2e/lib.sh's in_parallel (the teardowns) tested without the bed.
unit:
	bash images/recipes/observer-patch-check-test.sh
	bash e2e/drills/operator/accounting-selftest.sh
	bash e2e/lib-selftest.sh
	KOO_TESTBED=off $(CARGO) test --workspace --release --lib --bins --tests
	$(CARGO) test --workspace --release --doc

# The Kafka clients (watcher, offset probe) against a local single-node Kafka with SASL_SSL
# (SCRAM-SHA-512) and mTLS listeners; part of `unit` too, skips when `make kafka-jars` has not run.
secure-kafka-test:
	$(CARGO) test --release --test integration secure_kafka:: -- --nocapture

# The chart's PrometheusRule (promtool check + unit tests) and Grafana dashboard (valid JSON,
# only exported metric names); needs no bed. e2e/alerts-check.sh says what it checks.
alerts-check:
	bash e2e/alerts-check.sh

promtool:
	bash e2e/build/promtool.sh

# The release binary of `make build`: no debug build of the whole tree just to print the CRD.
operator_bin = $(CARGO_TARGET_DIR)/release/kafka-observer-operator

crds: build
	$(operator_bin) crd > crds/observerset.yaml
	cp crds/observerset.yaml charts/kafka-observer-operator/crds/observerset.yaml

crds-check: build
	$(operator_bin) crd | diff -u crds/observerset.yaml - \
	  || { echo "crds/observerset.yaml is stale: run 'make crds'"; exit 1; }
	diff -q crds/observerset.yaml charts/kafka-observer-operator/crds/observerset.yaml \
	  || { echo "the chart's copy of the CRD is stale: run 'make crds'"; exit 1; }

k8s-binaries:
	bash e2e/build/k8s.sh

kafka-jars:
	bash e2e/build/kafka-jars.sh

kafka-patched: kafka-jars
	bash e2e/build/kafka-patched.sh

# The observer patch's own Java (observer.ids format, cached reader, watch, loaded report): JUnit 5
# through Maven Surefire, no Kafka needed; prints PATCH-UNIT tests=<n> failures=<n> ...
patch-unit:
	bash e2e/build/patch-unit.sh

# Build and smoke-test the observer patch for every supported Kafka version (one line each).
kafka-versions:
	bash e2e/build/kafka-versions.sh

node-packages:
	bash e2e/build/node-packages.sh

node-tools:
	bash e2e/build/node-tools.sh

# The images the bed's node runs, built locally (nothing can be pulled); the operator image from
# the binary `make build` made. `make image` runs the operator's full multi-stage build instead.
images: build kafka-patched node-packages node-tools
	bash e2e/build/images.sh build

image: node-packages
	bash e2e/build/images.sh operator-full

testbed-up: build kafka-patched k8s-binaries node-packages node-tools images
	bash e2e/testbed/up.sh

testbed-down:
	bash e2e/testbed/down.sh

testbed-status:
	bash e2e/testbed/status.sh

drills-kafka: testbed-up
	bash e2e/drills/kafka/run.sh

# The operator's failure drills D1-D19 on the real nodes (e2e/drills/operator/README.md); one line
# each, "D<n> PASS <s>s" or "D<n> FAIL <reason>". DRILLS="D1 D7" runs a selection.
drills: testbed-up
	bash e2e/drills/operator/run.sh $(DRILLS)

# A seeded random fault schedule on the node-per-zone bed (e2e/drills/operator/soak.sh): zone
# partitions and power-offs, a slow remote zone, operator and apiserver kills, with an acks=all
# producer and the invariants checked on every sample. SEED=n MINUTES=m (defaults 1 and 20).
SEED ?= 1
MINUTES ?= 20
soak: testbed-up
	bash e2e/drills/operator/soak.sh $(SEED) $(MINUTES)

bench: bench-kafka bench-promotion bench-operator bench-policy bench-node bench-watch bench-status

bench-kafka: testbed-up
	bash e2e/bench/kafka.sh

# Under min ISR -> observer in the ISR, split by step, over KOO_BENCH_RUNS (5) lost zones.
bench-promotion: testbed-up
	bash e2e/bench/promotion.sh

bench-operator: testbed-up
	bash e2e/bench/operator.sh

bench-policy: testbed-up
	bash e2e/bench/policy.sh

# kubectl observer status/plan at 50,000 partitions on a Kafka cluster of its own on the bed's
# node (namespace kafka-bench, 1.5 GiB heaps; purged afterwards): prints STATUS-BENCH lines with
# p50/max and the plugin's CPU time. Hold the bed lock: flock -o /tmp/koo-bed.lock make bench-status.
bench-status: testbed-up
	bash e2e/bench/status-50k.sh

# observer.ids change (kubelet-style ..data swap) -> loaded in the JVM of one patched node on
# 127.0.8.1 (no bed needed): prints WATCH-BENCH with min/median/p90/max in ms.
bench-watch: kafka-patched
	bash patches/watch-bench.sh

# The real kubelet's ConfigMap volume timing (nudged at once, nudged later, unnudged): prints
# NODE lines with p50/max.
bench-node: testbed-up
	set -o pipefail; $(CARGO) test --release -p koo-testbed --test node_acceptance configmap_changes \
	  -- --nocapture | grep 'NODE\|test result'
