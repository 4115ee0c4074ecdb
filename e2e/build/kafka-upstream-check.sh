#!/usr/bin/env bash
# Proof for a reconstructed upstream source (used by kafka-patched.sh when
# patches/kafka-<v>/00-upstream-*.patch exists: Maven serves no sources jar for <v>, so the files
# we patch are rebuilt from an older release's sources plus that upstream delta).
# Compiles the vanilla reconstructed files the way Kafka's build does (javac -g --release 17;
# scalac with Kafka's optimizer flags) and requires every resulting class to match the class of
# the same name in Kafka <v>'s jars: same classes, same normalized bytecode (javap -c -p without
# constant-pool indices, offsets and lambda numbers) and the same string and number constants.
# Not compared: local variable names and javac-version artifacts, which differ between our JDK
# and upstream's for untouched releases too.
#
# Usage: kafka-upstream-check.sh <vanilla dir> <kafka lib dir> <version> <scalac classpath> <file>...
#   <file> as in the patches: module-prefixed (core/kafka/cluster/Partition.scala, metadata/...).
set -euo pipefail
vanilla="$1" lib="$2" version="$3" scalac_cp="$4"
shift 4
source "$(dirname "$0")/../lib.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes"
classpath="$(find "$lib" -name '*.jar' | LC_ALL=C sort | paste -sd:)"

java_files=() scala_files=() jars=() tops=()
for file in "$@"; do
  module="${file%%/*}" inner="${file#*/}"
  case "$file" in
    *.java) java_files+=("$vanilla/$file") ;;
    *.scala) scala_files+=("$vanilla/$file") ;;
  esac
  if [[ "$module" == core ]]; then jars+=("$lib/kafka_$SCALA_BINARY_VERSION-$version.jar")
  else jars+=("$lib/kafka-$module-$version.jar"); fi
  tops+=("${inner%.*}")
done
if [[ ${#java_files[@]} -gt 0 ]]; then
  javac -g --release 17 -nowarn -encoding UTF-8 -cp "$classpath" -d "$work/classes" "${java_files[@]}" >&2
fi
if [[ ${#scala_files[@]} -gt 0 ]]; then
  java -Xmx1536m -Xss8m -cp "$scalac_cp" scala.tools.nsc.Main -release 17 -nowarn -encoding UTF-8 \
    -opt:l:inline '-opt-inline-from:org.apache.kafka.**' '-opt-inline-from:kafka.**' \
    -classpath "$work/classes:$classpath" -d "$work/classes" "${scala_files[@]}" >&2
fi

# Same set of classes: each of ours is in the release's jars, and each jar entry of a patched
# top-level class (itself and its nested classes) is one of ours.
(cd "$work/classes" && find . -name '*.class' | sed -e 's|^\./||' -e 's|\.class$||' | LC_ALL=C sort) > "$work/ours"
printf '%s\n' "${jars[@]}" | LC_ALL=C sort -u | while read -r jar; do unzip -Z1 "$jar"; done |
  sed -n 's|\.class$||p' | LC_ALL=C sort -u > "$work/all"
for i in "${!tops[@]}"; do
  unzip -Z1 "${jars[$i]}" | grep -E "^${tops[$i]}(\\\$.*)?\\.class$" || true
done | sed 's|\.class$||' | LC_ALL=C sort -u > "$work/theirs"
missing="$(LC_ALL=C comm -23 "$work/ours" "$work/all"; LC_ALL=C comm -13 "$work/ours" "$work/theirs")"
if [[ -n "$missing" ]]; then
  log "the reconstructed sources do not produce Kafka $version's classes; differing: $(echo $missing)"
  exit 1
fi
# shellcheck disable=SC2312 # tr over a file this script wrote
mapfile -t classes < <(tr '/' '.' < "$work/ours")
jar_cp="$(printf '%s\n' "${jars[@]}" | LC_ALL=C sort -u | paste -sd:)"

code() { # normalized disassembly of the classes on classpath $1
  javap -c -p -cp "$1" "${classes[@]}" | sed -E \
    -e 's/#[0-9]+(, [0-9]+)?//g' -e 's/(lambda\$[A-Za-z0-9_]+\$)[0-9]+/\1N/g' \
    -e 's/(\$anonfun\$[A-Za-z0-9_]+\$)[0-9]+/\1N/g' -e 's/^( *)[0-9]+: /\1/' \
    -e 's/^( *(goto|goto_w|if[a-z_]*|jsr)) +[0-9]+/\1 L/' -e 's/^( *[-0-9a-z]+): [0-9]+$/\1: L/' -e 's/ +/ /g'
}
constants() { # string and number constants (indy recipes included) of the classes on classpath $1
  javap -v -p -cp "$1" "${classes[@]}" |
    sed -nE 's/^ *#[0-9]+ = (String|Integer|Long|Float|Double) +(#[0-9]+ +\/\/ +)?(.*)$/\1 \3/p' | LC_ALL=C sort -u
}
code "$work/classes" > "$work/ours.code"
code "$jar_cp" > "$work/theirs.code"
constants "$work/classes" > "$work/ours.const"
constants "$jar_cp" > "$work/theirs.const"
for kind in code const; do
  if ! diff -q "$work/ours.$kind" "$work/theirs.$kind" >/dev/null; then
    diff "$work/ours.$kind" "$work/theirs.$kind" | head -n 40 >&2 || true
    log "the reconstructed sources differ from Kafka $version's classes ($kind; < ours, > theirs)"
    exit 1
  fi
done
log "${#classes[@]} classes of Kafka $version reproduced from the reconstructed sources (code and constants)"
