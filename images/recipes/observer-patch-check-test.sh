#!/usr/bin/env bash
# observer-patch-check-test.sh: runs observer-patch-check.sh (with dash when there is one, else
# sh) against stand-in Kafka layouts built in a temp dir, and checks each case's exit status and
# a distinctive part of its message. Part of `make unit`; starts no JVM, takes well under a second.
#
# The layouts are $tmp/<case>/opt/kafka with bin/kafka-run-class.sh (a stand-in, not Kafka's),
# libs/ (tiny zip jars; the check only tests that kafka_<scala>-<version>.jar exists) and
# patch/observer-patch.jar (a zip with META-INF/MANIFEST.MF and
# io/kafkaobserver/patch/observer-patch.properties, the entry the check reads with unzip).
# The check is pointed at a layout with its own KAFKA_HOME variable, in an otherwise empty
# environment (env -i), so a CLASSPATH or KAFKA_VERSION of the caller does not leak in.
#
# Prints `ok <case>` or `FAIL <case>: ...` per case; exits 1 if any case failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check="$here/observer-patch-check.sh"
shell="$(command -v dash || command -v sh)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/t" "$tmp/jars"

# --- jars: one python3 run writes them all --------------------------------------------------
python3 - "$tmp/jars" <<'EOF'
import sys, zipfile
d = sys.argv[1]
def jar(name, props=None):
    with zipfile.ZipFile(f"{d}/{name}", "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: observer-patch-check-test\r\n\r\n")
        if props is not None:
            z.writestr("io/kafkaobserver/patch/observer-patch.properties", props)
for v in ("4.1.2", "4.0.2"):
    jar(f"patch-{v}.jar", f"kafka.version={v}\npatch.sha=0000000\nscala.version=2.13\n")
    jar(f"kafka_2.13-{v}.jar")
    jar(f"kafka-clients-{v}.jar")
jar("patch-noprops.jar")  # a jar without the properties entry: no version to compare
EOF

# --- stand-in scripts -----------------------------------------------------------------------
# Like Kafka's kafka-run-class.sh: $CLASSPATH first, each libs/ file appended, the leading colon
# of an empty CLASSPATH dropped, `"$JAVA" ... -cp "$CLASSPATH" ... "$@"`.
cat > "$tmp/run-class-appends" <<'EOF'
#!/bin/sh
base_dir=$(dirname "$0")/..
for file in "$base_dir"/libs/*; do
  CLASSPATH="$CLASSPATH":"$file"
done
CLASSPATH=${CLASSPATH#:}
if [ -z "$JAVA_HOME" ]; then JAVA=java; else JAVA="$JAVA_HOME/bin/java"; fi
exec "$JAVA" -Xmx1G -server -cp "$CLASSPATH" -Dkafka.logs.dir="$LOG_DIR" "$@"
EOF
# libs/ first, $CLASSPATH last.
cat > "$tmp/run-class-last" <<'EOF'
#!/bin/sh
base_dir=$(dirname "$0")/..
libs=
for file in "$base_dir"/libs/*; do
  libs="$libs":"$file"
done
CLASSPATH="${libs#:}:$CLASSPATH"
exec "$JAVA_HOME/bin/java" -cp "$CLASSPATH" "$@"
EOF
# $CLASSPATH only, libs/ never appended.
cat > "$tmp/run-class-no-libs" <<'EOF'
#!/bin/sh
exec "$JAVA_HOME/bin/java" -cp "$CLASSPATH" "$@"
EOF
# Launchers for --scan. The clean one has a commented-out assignment and a JAVA_CLASSPATH=, which
# the scan must not take for an assignment to CLASSPATH.
cat > "$tmp/launcher-clean" <<'EOF'
#!/bin/sh
# CLASSPATH=/in/a/comment is no assignment
JAVA_CLASSPATH=/not/the/variable
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
EOF
cat > "$tmp/launcher-assigns" <<'EOF'
#!/bin/sh
export CLASSPATH=/opt/kafka/custom/*
exec /opt/kafka/bin/kafka-server-start.sh /tmp/strimzi.properties
EOF

# layout CASE RUN_CLASS PATCH_JAR KAFKA_VERSION: $tmp/CASE/opt/kafka; RUN_CLASS "" for none.
layout() {
  local home="$tmp/$1/opt/kafka"
  mkdir -p "$home/bin" "$home/libs" "$home/patch"
  if [[ -n "$2" ]]; then cp "$tmp/$2" "$home/bin/kafka-run-class.sh"; fi
  cp "$tmp/launcher-clean" "$home/bin/kafka-server-start.sh"
  cp "$tmp/launcher-clean" "$home/kafka_run.sh"
  if [[ -n "$3" ]]; then cp "$tmp/jars/$3" "$home/patch/observer-patch.jar"; fi
  cp "$tmp/jars/kafka_2.13-$4.jar" "$tmp/jars/kafka-clients-$4.jar" "$home/libs/"
  chmod 0755 "$home"/bin/* "$home/kafka_run.sh"
}

failed=0
# run_case CASE RC [-e SUBSTRING]... [VAR=VALUE]... -- [CHECK ARGS]...
# Runs the check with KAFKA_HOME=$tmp/CASE/opt/kafka plus the VAR=VALUEs, nothing else from the
# caller's environment but PATH; wants exit status RC and every SUBSTRING in stdout+stderr.
run_case() {
  local name="$1" want_rc="$2" home="$tmp/$1/opt/kafka" rc=0 out
  shift 2
  local -a expect=() vars=()
  while [[ $# -gt 0 && "$1" != -- ]]; do
    if [[ "$1" == -e ]]; then expect+=("$2"); shift 2; else vars+=("$1"); shift; fi
  done
  [[ $# -gt 0 ]] && shift
  out="$(env -i PATH="$PATH" TMPDIR="$tmp/t" KAFKA_HOME="$home" ${vars[@]+"${vars[@]}"} \
    "$shell" "$check" "$@" 2>&1)" || rc=$?
  if [[ "$rc" != "$want_rc" ]]; then
    echo "FAIL $name: exit $rc, want $want_rc; output: ${out//$'\n'/ | }"
    failed=$((failed + 1)); return 0
  fi
  local e
  for e in ${expect[@]+"${expect[@]}"}; do
    if [[ "$out" != *"$e"* ]]; then
      echo "FAIL $name: exit $rc as wanted, but no '$e' in: ${out//$'\n'/ | }"
      failed=$((failed + 1)); return 0
    fi
  done
  echo "ok $name"
}

have_unzip=0
command -v unzip >/dev/null 2>&1 && have_unzip=1

# --- the cases ------------------------------------------------------------------------------
c=passes; layout $c run-class-appends patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 0 \
  -e "ok: $h/patch/observer-patch.jar is first of the 3 class path entries kafka-run-class.sh builds (Kafka's libs/ after it); 2 launcher(s) scanned, none assigns CLASSPATH" \
  CLASSPATH="$h/patch/observer-patch.jar" KAFKA_VERSION=4.1.2 \
  -- --scan "$h/bin/kafka-server-start.sh" --scan "$h/kafka_run.sh"

c=classpath-last; layout $c run-class-last patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: the class path kafka-run-class.sh builds starts with '$h/bin/../libs/kafka" \
  -e "', not $h/patch/observer-patch.jar (CLASSPATH='$h/patch/observer-patch.jar';" \
  CLASSPATH="$h/patch/observer-patch.jar" KAFKA_VERSION=4.1.2 --

c=classpath-unset; layout $c run-class-appends patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: the class path kafka-run-class.sh builds starts with '$h/bin/../libs/kafka" \
  -e "', not $h/patch/observer-patch.jar (CLASSPATH='';" \
  KAFKA_VERSION=4.1.2 --

c=libs-not-appended; layout $c run-class-no-libs patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: no Kafka jar from $h/libs after the patch jar: kafka-run-class.sh did not append libs/" \
  CLASSPATH="$h/patch/observer-patch.jar" --

c=launcher-assigns-classpath; layout $c run-class-appends patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
cp "$tmp/launcher-assigns" "$h/kafka_run.sh"
run_case $c 1 \
  -e "2:export CLASSPATH=/opt/kafka/custom/*" \
  -e "FAIL: $h/kafka_run.sh assigns CLASSPATH (the lines above)" \
  CLASSPATH="$h/patch/observer-patch.jar" \
  -- --scan "$h/bin/kafka-server-start.sh" --scan "$h/kafka_run.sh"

c=missing-launcher; layout $c run-class-appends patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: /etc/kafka/docker/launch-not-here does not exist: the base image's start scripts are not where the recipe expects them" \
  CLASSPATH="$h/patch/observer-patch.jar" \
  -- --scan "$h/bin/kafka-server-start.sh" --scan /etc/kafka/docker/launch-not-here

c=missing-run-class; layout $c "" patch-4.1.2.jar 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: no $h/bin/kafka-run-class.sh: not a Kafka distribution layout" \
  CLASSPATH="$h/patch/observer-patch.jar" --

c=missing-patch-jar; layout $c run-class-appends "" 4.1.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: $h/patch/observer-patch.jar is missing or empty" \
  CLASSPATH="$h/patch/observer-patch.jar" --

c=no-kafka-jar; layout $c run-class-appends patch-4.1.2.jar 4.0.2
h="$tmp/$c/opt/kafka"
run_case $c 1 \
  -e "FAIL: no $h/libs/kafka_<scala>-4.1.2.jar: this image does not carry Kafka 4.1.2" \
  CLASSPATH="$h/patch/observer-patch.jar" KAFKA_VERSION=4.1.2 --

if [[ "$have_unzip" == 1 ]]; then
  c=jar-other-version; layout $c run-class-appends patch-4.0.2.jar 4.1.2
  h="$tmp/$c/opt/kafka"
  run_case $c 1 \
    -e "FAIL: $h/patch/observer-patch.jar was built for Kafka '4.0.2', this image carries 4.1.2" \
    CLASSPATH="$h/patch/observer-patch.jar" KAFKA_VERSION=4.1.2 --

  c=jar-without-version; layout $c run-class-appends patch-noprops.jar 4.1.2
  h="$tmp/$c/opt/kafka"
  run_case $c 1 \
    -e "FAIL: $h/patch/observer-patch.jar was built for Kafka 'unknown', this image carries 4.1.2" \
    CLASSPATH="$h/patch/observer-patch.jar" KAFKA_VERSION=4.1.2 --
else
  echo "skip jar-other-version, jar-without-version: no unzip on PATH (the check skips that comparison too)"
fi

if [[ "$failed" -gt 0 ]]; then
  echo "observer-patch-check-test: $failed case(s) failed ($shell $check)"
  exit 1
fi
echo "observer-patch-check-test: all cases passed ($shell $check)"
