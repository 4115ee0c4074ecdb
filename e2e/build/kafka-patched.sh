#!/usr/bin/env bash
# Build the observer patch for one Kafka version into
#   $KOO_CACHE/kafka-patched/<version>-<patch sha>/observer-patch.jar
# and print that path as the last stdout line. Idempotent: a finished build is reused.
#
# Inputs: patches/src/ (new classes, every version), patches/kafka-<version>/*.patch (unified
# diffs, applied in name order with `patch -p1`; a path's first component names the module:
# core -> kafka_<scala>-<version>-sources.jar, <m> -> kafka-<m>-<version>-sources.jar) and
# patches/kafka-<version>/src/ (new classes for that version only, optional).
# patches/kafka-<version>/sources-from (optional, one version string): Maven serves no -sources.jar
# for some releases (4.2.2, 4.4.0); the patched files are then taken from that version's sources,
# and the build fails unless every vanilla class compiled from them is byte-identical in both
# versions' jars (proof that those files did not change between the two releases).
# If the files did change, 00-upstream-*.patch files in patches/kafka-<version>/ carry the upstream
# delta (reconstructed): they are applied first, and kafka-upstream-check.sh must reproduce the
# release's classes from the result before the other patches are applied on top.
# Only the patched files are compiled (Java with javac --release 17, Scala with scala-compiler
# of exactly the Scala version on Kafka's classpath) against the full Kafka classpath. No Gradle.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
version="${1:-$KAFKA_VERSION}"
patch_dir="$root/patches/kafka-$version"
common_src="$root/patches/src"

[[ -d "$patch_dir" ]] || { log "no patch for Kafka $version: $patch_dir does not exist"; exit 1; }

# The sha covers everything that shapes the jar: the shared sources, this version's patch
# directory and this script.
patch_sha="$(
  cd "$root" &&
    { find patches/src "patches/kafka-$version" -type f -print0 | LC_ALL=C sort -z |
        xargs -0 sha256sum; sha256sum e2e/build/kafka-patched.sh e2e/build/kafka-upstream-check.sh; } |
    sha256sum | cut -c1-12
)"
dest="$KOO_CACHE/kafka-patched/$version-$patch_sha"
if [[ -f "$dest/observer-patch.jar" ]]; then
  log "cached: $dest/observer-patch.jar"
  echo "$dest/observer-patch.jar"
  exit 0
fi

kafka_home="$(bash "$here/kafka-jars.sh" "$version" | tail -n 1)"
lib="$kafka_home/lib"
sources="$kafka_home/sources"
sources_version="$version"
if [[ -f "$patch_dir/sources-from" ]]; then
  sources_version="$(tr -d '[:space:]' < "$patch_dir/sources-from")"
  sources="$(bash "$here/kafka-jars.sh" "$sources_version" | tail -n 1)/sources"
  log "patched files taken from the Kafka $sources_version sources (patches/kafka-$version/sources-from)"
fi
module_jar() { # module_jar <dir> <module> <version>: the jar of that module in <dir>
  if [[ "$2" == core ]]; then echo "$1/kafka_$SCALA_BINARY_VERSION-$3"; else echo "$1/kafka-$2-$3"; fi
}
classpath="$(find "$lib" -name '*.jar' | LC_ALL=C sort | paste -sd:)"

scala_library="$(find "$lib" -name 'scala-library-*.jar' | head -n 1)"
[[ -n "$scala_library" ]] || { log "no scala-library jar in $lib"; exit 1; }
scala_version="$(basename "$scala_library" .jar)"
scala_version="${scala_version#scala-library-}"

# scala-compiler and scala-reflect of exactly that version, fetched once into the cache.
scala_dir="$KOO_CACHE/scala/$scala_version"
if [[ ! -f "$scala_dir/.complete" ]]; then
  mkdir -p "$scala_dir"
  for artifact in scala-compiler scala-reflect; do
    log "fetching org.scala-lang:$artifact:$scala_version"
    mvn_strict -q dependency:copy -Dartifact="org.scala-lang:$artifact:$scala_version" \
      -DoutputDirectory="$scala_dir" > "$scala_dir/mvn.log" 2>&1 ||
      { cat "$scala_dir/mvn.log" >&2; log "cannot fetch $artifact $scala_version"; exit 1; }
  done
  touch "$scala_dir/.complete"
fi
scalac_cp="$scala_dir/scala-compiler-$scala_version.jar:$scala_dir/scala-reflect-$scala_version.jar:$scala_library"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/classes"
started=$SECONDS

# Extract exactly the files the patches touch, then apply them.
# shellcheck disable=SC2312 # find/sort over a directory checked above; no patch at all is caught below
mapfile -t patches < <(find "$patch_dir" -maxdepth 1 -name '*.patch' | LC_ALL=C sort)
[[ ${#patches[@]} -gt 0 ]] || { log "no *.patch files in $patch_dir"; exit 1; }
# shellcheck disable=SC2312 # sed over the patch files just listed
mapfile -t touched < <(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "${patches[@]}" | LC_ALL=C sort -u)
for file in "${touched[@]}"; do
  module="${file%%/*}"
  inner="${file#*/}"
  jar="$(module_jar "$sources" "$module" "$sources_version")-sources.jar"
  [[ -f "$jar" ]] || { log "no sources jar for module $module: $jar (if Maven serves none for" \
    "Kafka $sources_version, name a release with identical files in patches/kafka-$version/sources-from)"; exit 1; }
  mkdir -p "$work/src/$(dirname "$file")"
  unzip -p "$jar" "$inner" > "$work/src/$file" ||
    { log "$inner is not in $(basename "$jar")"; exit 1; }
done
mapfile -t upstream < <(printf '%s\n' "${patches[@]}" | { grep '/00-upstream-[^/]*\.patch$' || true; })
if [[ ${#upstream[@]} -gt 0 ]]; then
  [[ "$sources_version" != "$version" ]] || { log "00-upstream-*.patch needs a sources-from"; exit 1; }
  cp -r "$work/src" "$work/vanilla"
  for p in "${upstream[@]}"; do
    log "applying $(basename "$p") (reconstructed upstream $sources_version -> $version)"
    (cd "$work/vanilla" && patch -p1 --forward --no-backup-if-mismatch --quiet -i "$p" >&2) ||
      { log "$(basename "$p") does not apply to Kafka $sources_version sources"; exit 1; }
  done
  # Every file we patch, reconstructed or not, must reproduce this release's classes.
  bash "$here/kafka-upstream-check.sh" "$work/vanilla" "$lib" "$version" "$scalac_cp" "${touched[@]}"
fi
for p in "${patches[@]}"; do
  log "applying $(basename "$p")"
  (cd "$work/src" && patch -p1 --forward --no-backup-if-mismatch --quiet -i "$p" >&2) ||
    { log "$(basename "$p") does not apply to Kafka $version sources"; exit 1; }
done

# Java first (new classes and patched Java files), then Scala against them.
# (Subshells inherit errexit: every command in these lists must succeed or be guarded.)
version_src=()
[[ -d "$patch_dir/src" ]] && version_src=("$patch_dir/src")
# shellcheck disable=SC2312 # find/sort over the source directories checked above; javac fails on an incomplete list
mapfile -t java_files < <(
  find "$common_src" "${version_src[@]}" -name '*.java' | LC_ALL=C sort
  # shellcheck disable=SC2312 # printf/grep/sed over an array, grep guarded: nothing here can fail
  printf '%s\n' "${touched[@]}" | { grep '\.java$' || true; } | sed "s|^|$work/src/|"
)
log "javac --release 17: ${#java_files[@]} files"
javac --release 17 -nowarn -encoding UTF-8 -cp "$classpath" -d "$work/classes" "${java_files[@]}" >&2

# shellcheck disable=SC2312 # printf/grep/sed over an array: no command here can fail but grep, guarded
mapfile -t scala_files < <(printf '%s\n' "${touched[@]}" | { grep '\.scala$' || true; } | sed "s|^|$work/src/|")
if [[ ${#scala_files[@]} -gt 0 ]]; then
  log "scalac $scala_version: ${#scala_files[@]} files"
  java -Xmx1536m -Xss8m -cp "$scalac_cp" scala.tools.nsc.Main \
    -release 17 -nowarn -encoding UTF-8 \
    -classpath "$work/classes:$classpath" -d "$work/classes" "${scala_files[@]}" >&2
fi

# The manifest the start-up proof reads: every class compiled from a patched file must be
# loaded from this jar, and each patched top-level class must carry the marker.
patched_classes="$(
  cd "$work/classes" && find . -name '*.class' ! -path './io/kafkaobserver/*' |
    sed -e 's|^\./||' -e 's|\.class$||' -e 's|/|.|g' | LC_ALL=C sort | paste -sd,
)"
marked_classes="$(
  printf '%s\n' "${touched[@]}" | sed -e 's|^[^/]*/||' -e 's|\.[a-z]*$||' -e 's|/|.|g' | paste -sd,
)"
for class in ${marked_classes//,/ }; do
  [[ -f "$work/classes/${class//.//}.class" ]] || { log "$class was not compiled"; exit 1; }
done
if [[ "$sources_version" != "$version" && ${#upstream[@]} -eq 0 ]]; then
  # Sources of another release: every vanilla class our build replaces must be byte-identical in
  # the two releases' jars, else the patched classes would silently revert upstream changes.
  sources_lib="$KOO_CACHE/kafka/$sources_version/lib"
  # shellcheck disable=SC2312 # printf/cut/sort over an array
  mapfile -t modules < <(printf '%s\n' "${touched[@]}" | cut -d/ -f1 | LC_ALL=C sort -u)
  checked=0
  for class in ${patched_classes//,/ }; do
    entry="${class//.//}.class" ours="" theirs=""
    for module in "${modules[@]}"; do
      ours="${ours:-$(unzip -p "$(module_jar "$lib" "$module" "$version").jar" "$entry" 2>/dev/null | sha256sum | grep -v '^e3b0c442' || true)}"
      theirs="${theirs:-$(unzip -p "$(module_jar "$sources_lib" "$module" "$sources_version").jar" "$entry" 2>/dev/null | sha256sum | grep -v '^e3b0c442' || true)}"
    done
    [[ -z "$ours" && -z "$theirs" ]] && continue # a class only the patch defines
    [[ -n "$ours" && "$ours" == "$theirs" ]] ||
      { log "$class differs between Kafka $version and $sources_version: the $sources_version sources are not $version's"; exit 1; }
    checked=$((checked + 1))
  done
  log "$checked vanilla classes byte-identical in Kafka $version and $sources_version"
fi
cat > "$work/classes/io/kafkaobserver/patch/observer-patch.properties" <<EOF
kafka.version=$version
patch.sha=$patch_sha
scala.version=$scala_version
marked.classes=$marked_classes
patched.classes=$patched_classes
EOF

# --date gives fixed entry timestamps, so the same inputs give the same bytes.
mkdir -p "$dest.tmp"
# shellcheck disable=SC2312 # find in the class directory javac just wrote; jar fails on a missing entry
mapfile -t entries < <(cd "$work/classes" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
(cd "$work/classes" &&
  jar --create --file "$dest.tmp/observer-patch.jar" --date 2020-01-01T00:00:02Z "${entries[@]}" >&2)
rm -rf "$dest"
mv "$dest.tmp" "$dest"
log "built in $((SECONDS - started)) s: $dest/observer-patch.jar"
echo "$dest/observer-patch.jar"
