# Apache Kafka's official JVM image (docker.io/apache/kafka) with the kafka-observer-operator
# observer patch first on the classpath. A recipe: NOT built or run in this repository (the base
# cannot be pulled here); images/recipes/README.md says what it relies on and how to check it.
#
# Build context (images/recipes/README.md, "Build"):
#   observer-patch.jar        built for exactly KAFKA_VERSION: e2e/build/kafka-patched.sh <version>
#   observer-patch-check.sh   this directory's classpath check, run below and kept in the image
#
# How the jar ends up first (upstream apache/kafka, as read): the image's CMD
# /etc/kafka/docker/run runs .../launch, which execs bin/kafka-server-start.sh, which execs
# bin/kafka-run-class.sh; that script starts the class path from $CLASSPATH and appends every
# file in libs/ after it. So ENV CLASSPATH=<the jar> puts the jar before all of Kafka's jars,
# with its own entry (never a shared libs/* wildcard, whose order the JVM leaves unspecified).
ARG KAFKA_VERSION=4.1.2
ARG APACHE_KAFKA_IMAGE=docker.io/apache/kafka
FROM ${APACHE_KAFKA_IMAGE}:${KAFKA_VERSION}
# Declared again to be seen below FROM: KAFKA_VERSION reaches the check as an environment
# variable (a base that sets ENV KAFKA_VERSION wins over it: then the base's own version is checked).
ARG KAFKA_VERSION
ARG APACHE_KAFKA_IMAGE

# The base ends with USER appuser; adding files under /opt/kafka needs root for a moment.
USER root
COPY observer-patch.jar /opt/kafka/patch/observer-patch.jar
COPY observer-patch-check.sh /opt/kafka/patch/observer-patch-check.sh
RUN chmod 0755 /opt/kafka/patch /opt/kafka/patch/observer-patch-check.sh \
 && chmod 0644 /opt/kafka/patch/observer-patch.jar

# KAFKA_OBSERVER_IDS_FILE: the observer ConfigMap mounted as a directory at /etc/kafka/observer
# (README, "Mount the observer list"). The image's config step turns every KAFKA_* variable it
# does not exclude into a server.properties line, so this one also appears there as
# observer.ids.file=...: a key that is no Kafka setting (Kafka keeps unknown keys for plugins
# instead of rejecting them; not observed with this image).
ENV CLASSPATH=/opt/kafka/patch/observer-patch.jar \
    KAFKA_OBSERVER_IDS_FILE=/etc/kafka/observer/observer.ids

# Back to the base image's user (by name, as the base sets it; its uid is whatever the base's
# adduser gave it, not checked: with runAsNonRoot set a numeric runAsUser in the pod spec).
USER appuser

# Fails the build unless kafka-run-class.sh, as this base ships it, puts the jar first, the base
# carries Kafka $KAFKA_VERSION and the jar was built for it, and the launchers the image runs
# assign no CLASSPATH of their own. Starts no JVM.
RUN /opt/kafka/patch/observer-patch-check.sh \
      --scan /etc/kafka/docker/run \
      --scan /etc/kafka/docker/launch \
      --scan /opt/kafka/bin/kafka-server-start.sh

LABEL org.opencontainers.image.title="kafka-observer/apache-kafka" \
      org.opencontainers.image.version="${KAFKA_VERSION}" \
      org.opencontainers.image.base.name="${APACHE_KAFKA_IMAGE}:${KAFKA_VERSION}" \
      org.opencontainers.image.description="Apache Kafka ${KAFKA_VERSION} (official JVM image) with the kafka-observer-operator observer patch first on the classpath (/opt/kafka/patch/observer-patch.jar); observer ids from KAFKA_OBSERVER_IDS_FILE (default /etc/kafka/observer/observer.ids, a ConfigMap mounted as a directory)"
