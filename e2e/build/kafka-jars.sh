#!/usr/bin/env bash
# Fetch the pinned Apache Kafka runtime classpath and the Kafka sources jars from Maven Central
# into $KOO_CACHE/kafka/<version>/{lib,sources}. Idempotent: a finished fetch leaves a stamp.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
version="${1:-$KAFKA_VERSION}"
dest="$KOO_CACHE/kafka/$version"
if [[ -f "$dest/.complete" ]]; then echo "$dest"; exit 0; fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
sed -e "s/@KAFKA_VERSION@/$version/g" -e "s/@SCALA@/$SCALA_BINARY_VERSION/g" \
  "$here/kafka-pom.xml" > "$work/pom.xml"
rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
(cd "$work" &&
  mvn_strict -q dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$dest.tmp/lib" >&2 &&
  mvn_strict -q dependency:copy-dependencies -DincludeScope=runtime -Dclassifier=sources \
    -DincludeGroupIds=org.apache.kafka -DoutputDirectory="$dest.tmp/sources" >&2)
# Some releases come without sources jars (here 4.2.2 and 4.4.0; the plugin skips missing
# classifier jars silently): the runtime is still usable, a patch then needs a sources-from.
[[ -f "$dest.tmp/sources/kafka_$SCALA_BINARY_VERSION-$version-sources.jar" ]] ||
  log "Maven serves no sources jars for Kafka $version: runtime jars only" \
    "(patches/kafka-$version/sources-from can name a release with identical patched files)"
for j in kafka_$SCALA_BINARY_VERSION kafka-metadata kafka-server kafka-clients kafka-tools; do
  ls "$dest.tmp/lib/$j-$version.jar" >/dev/null
done
touch "$dest.tmp/.complete"
rm -rf "$dest"; mv "$dest.tmp" "$dest"
echo "$dest"
