#!/bin/sh
# observer-patch-check.sh: inside an image built from images/recipes/*.Dockerfile, check that
# Kafka's own start script (bin/kafka-run-class.sh, which kafka-server-start.sh execs) puts the
# observer patch jar first on the JVM's classpath. The recipes run it at build time, as the
# image's user; `kubectl exec POD -- /opt/kafka/patch/observer-patch-check.sh` runs it again in a
# running pod, with the pod's environment (a CLASSPATH set in the pod spec replaces the image's).
#
# It starts no JVM: kafka-run-class.sh runs with JAVA_HOME pointing at a stand-in `java` that
# prints the value after -cp and exits. POSIX sh; uses grep, sed, tr, env, mktemp (unzip if any).
#
#   KAFKA_HOME            default /opt/kafka
#   OBSERVER_PATCH_JAR    default $KAFKA_HOME/patch/observer-patch.jar
#   KAFKA_VERSION         when set: $KAFKA_HOME/libs must hold kafka_<scala>-$KAFKA_VERSION.jar,
#                         and, where unzip exists, the jar's manifest must name that version
#   --scan FILE           a launcher of the base image (repeatable): FILE must exist and must not
#                         assign CLASSPATH (an assignment there could drop or reorder the jar)
#
# Exit 0 and one "ok" line on stderr, or exit 1 naming what is wrong.
set -eu

home="${KAFKA_HOME:-/opt/kafka}"
jar="${OBSERVER_PATCH_JAR:-$home/patch/observer-patch.jar}"
manifest=io/kafkaobserver/patch/observer-patch.properties

fail() { echo "observer-patch-check: FAIL: $*" >&2; exit 1; }
note() { echo "observer-patch-check: $*" >&2; }

scanned=0
while [ $# -gt 0 ]; do
  case "$1" in
    --scan)
      [ $# -ge 2 ] || fail "--scan needs a file"
      [ -f "$2" ] || fail "$2 does not exist: the base image's start scripts are not where the recipe expects them"
      # An assignment (not in a comment) to CLASSPATH itself; JAVA_CLASSPATH and the like do not match.
      if grep -nE '^[^#]*(^|[^A-Za-z0-9_])CLASSPATH=' "$2" >&2; then
        fail "$2 assigns CLASSPATH (the lines above): read it before trusting this image"
      fi
      scanned=$((scanned + 1))
      shift 2 ;;
    *) fail "unknown argument: $1 (usage: $0 [--scan FILE]...)" ;;
  esac
done

[ -s "$jar" ] || fail "$jar is missing or empty"
[ -f "$home/bin/kafka-run-class.sh" ] || fail "no $home/bin/kafka-run-class.sh: not a Kafka distribution layout"

if [ -n "${KAFKA_VERSION:-}" ]; then
  found=""
  for f in "$home"/libs/kafka_*-"$KAFKA_VERSION".jar; do
    [ -f "$f" ] && found="$f"
  done
  [ -n "$found" ] || fail "no $home/libs/kafka_<scala>-$KAFKA_VERSION.jar: this image does not carry Kafka $KAFKA_VERSION"
  if command -v unzip >/dev/null 2>&1; then
    built="$(unzip -p "$jar" "$manifest" 2>/dev/null | sed -n 's/^kafka\.version=//p' | tr -d '\r')"
    [ "$built" = "$KAFKA_VERSION" ] ||
      fail "$jar was built for Kafka '${built:-unknown}', this image carries $KAFKA_VERSION (build the jar with e2e/build/kafka-patched.sh $KAFKA_VERSION)"
  else
    note "no unzip here: the jar's Kafka version is checked at start-up (the patch refuses to start on a mismatch)"
  fi
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cat > "$tmp/bin/java" <<'EOF'
#!/bin/sh
# Stand-in for java: print the class path kafka-run-class.sh passes, start nothing.
while [ $# -gt 0 ]; do
  case "$1" in
    -cp | -classpath | --class-path) printf '%s\n' "$2"; exit 0 ;;
    -version) echo 'openjdk version "17" (observer-patch-check stand-in)' >&2; exit 0 ;;
  esac
  shift
done
echo "observer-patch-check: the stand-in java got no -cp" >&2
exit 3
EOF
chmod 0755 "$tmp/bin/java"

# LOG_DIR and an empty KAFKA_LOG4J_OPTS: kafka-run-class.sh then creates no log directory.
cp="$(env JAVA_HOME="$tmp" LOG_DIR="$tmp/logs" KAFKA_LOG4J_OPTS= KAFKA_DEBUG= \
  "$home/bin/kafka-run-class.sh" kafka.Kafka /dev/null)" ||
  fail "$home/bin/kafka-run-class.sh with a stand-in java failed"
[ -n "$cp" ] || fail "$home/bin/kafka-run-class.sh passed an empty class path"

first="${cp%%:*}"
[ "$first" = "$jar" ] ||
  fail "the class path kafka-run-class.sh builds starts with '$first', not $jar (CLASSPATH='${CLASSPATH:-}'; class path: $cp)"
case ":$cp:" in
  *":$home/libs/kafka_"* | *":$home/bin/../libs/kafka_"*) ;;
  *) fail "no Kafka jar from $home/libs after the patch jar: kafka-run-class.sh did not append libs/ (class path: $cp)" ;;
esac
entries="$(printf '%s\n' "$cp" | tr ':' '\n' | grep -c .)"
note "ok: $jar is first of the $entries class path entries kafka-run-class.sh builds (Kafka's libs/ after it); $scanned launcher(s) scanned, none assigns CLASSPATH"
