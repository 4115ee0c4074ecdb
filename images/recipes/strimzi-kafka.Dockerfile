# Strimzi's Kafka image (quay.io/strimzi/kafka:<strimzi>-kafka-<kafka>) with the
# kafka-observer-operator observer patch first on the classpath, for `spec.kafka.image` of a
# Strimzi `Kafka` (examples/strimzi/). A recipe: NOT built or run in this repository (the base
# cannot be pulled here); images/recipes/README.md says what it relies on and how to check it.
#
# Build context (images/recipes/README.md, "Build"):
#   observer-patch.jar        built for exactly KAFKA_VERSION: e2e/build/kafka-patched.sh <version>
#   observer-patch-check.sh   this directory's classpath check, run below and kept in the image
#
# STRIMZI_VERSION has no default on purpose: name the Strimzi release you run, whose image for
# KAFKA_VERSION must exist (which releases ship which Kafka versions was not checked here).
#
# How the jar ends up first (upstream, as read): Strimzi starts a broker or controller with
# $KAFKA_HOME/kafka_run.sh, which execs Kafka's own bin/kafka-server-start.sh (under tini), which
# execs bin/kafka-run-class.sh; that script starts the class path from $CLASSPATH and appends every
# file in libs/ after it, and Strimzi's scripts do not set CLASSPATH. So ENV CLASSPATH=<the jar>
# puts the jar before all of Kafka's and Strimzi's jars, in an entry of its own.
# The shape (FROM Strimzi's image, USER root:root, add files, USER 1001) is the one Strimzi
# documents for adding connector plugins to its Kafka image.
ARG STRIMZI_VERSION
ARG KAFKA_VERSION=4.1.2
ARG STRIMZI_KAFKA_IMAGE=quay.io/strimzi/kafka
FROM ${STRIMZI_KAFKA_IMAGE}:${STRIMZI_VERSION}-kafka-${KAFKA_VERSION}
# Declared again to be seen below FROM. Strimzi's image sets ENV KAFKA_VERSION itself, which wins
# over this build argument in RUN: the check below therefore compares the jar with the Kafka
# version the base image declares (and finds in its libs/).
ARG STRIMZI_VERSION
ARG KAFKA_VERSION
ARG STRIMZI_KAFKA_IMAGE

# No package installs: a Strimzi proposal would move its images to ubi9-micro, which has no package
# manager; this recipe installs nothing (its check needs sh, grep, sed, tr, env and mktemp).
USER root:root
COPY observer-patch.jar /opt/kafka/patch/observer-patch.jar
COPY observer-patch-check.sh /opt/kafka/patch/observer-patch-check.sh
RUN chmod 0755 /opt/kafka/patch /opt/kafka/patch/observer-patch-check.sh \
 && chmod 0644 /opt/kafka/patch/observer-patch.jar

# KAFKA_OBSERVER_IDS_FILE: the observer ConfigMap mounted as a directory at /mnt/observer
# (Strimzi accepts additional volume mounts only under /mnt); the node pools of examples/strimzi/
# set the same value in template.kafkaContainer.env, which wins over this default.
ENV CLASSPATH=/opt/kafka/patch/observer-patch.jar \
    KAFKA_OBSERVER_IDS_FILE=/mnt/observer/observer.ids

# Back to Strimzi's user (uid 1001, group 0).
USER 1001

# Fails the build unless kafka-run-class.sh, as this base ships it, puts the jar first, the base
# carries Kafka $KAFKA_VERSION and the jar was built for it, and the launchers Strimzi runs assign
# no CLASSPATH of their own. Starts no JVM.
RUN /opt/kafka/patch/observer-patch-check.sh \
      --scan /opt/kafka/kafka_run.sh \
      --scan /opt/kafka/bin/kafka-server-start.sh

LABEL org.opencontainers.image.title="kafka-observer/strimzi-kafka" \
      org.opencontainers.image.version="${STRIMZI_VERSION}-kafka-${KAFKA_VERSION}" \
      org.opencontainers.image.base.name="${STRIMZI_KAFKA_IMAGE}:${STRIMZI_VERSION}-kafka-${KAFKA_VERSION}" \
      org.opencontainers.image.description="Strimzi ${STRIMZI_VERSION} Kafka ${KAFKA_VERSION} image with the kafka-observer-operator observer patch first on the classpath (/opt/kafka/patch/observer-patch.jar); observer ids from KAFKA_OBSERVER_IDS_FILE (default /mnt/observer/observer.ids, a ConfigMap mounted as a directory)"
