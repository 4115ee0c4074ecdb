# Class data sharing for the bed's JVMs (sourced by e2e/testbed/kafka.sh).
# Seven nodes and every tool call load the same ~7000 classes from the same jars; a shared archive
# roughly halves a tool run (2.8 s -> 1.4 s) and a node's startup CPU on the two shared cores.
# Lifecycle, per classpath (the key covers the JDK, the patch jar and every jar's size and mtime):
#   1. without an archive, each node and the health-check tools record the classes they load
#      (-XX:DumpLoadedClassList) into .testbed/kafka/cds/<key>.lists/;
#   2. once `up` finds the cluster healthy it dumps one static archive from the merged lists, in
#      the background (kafka-cds.pid), and renames it into place when complete;
#   3. later JVMs map it (-XX:SharedArchiveFile). -Xshare:auto (the default) makes any mismatch a
#      silent fallback to normal class loading, never a failure.
# KAFKA_CDS=off disables all of it.

cds_enabled() { [[ "${KAFKA_CDS:-on}" != off ]]; }

cds_key() {
  local cp jar lib
  cp="$(kafka_classpath)" && jar="$(patch_jar)" && lib="$(kafka_lib)" || exit 1
  { java -version 2>&1; echo "$cp"; stat -c '%n %s %Y' ${jar:+"$jar"} "$lib"/*.jar; } |
    sha256sum | cut -c1-16
}
# Computed once per kafka.sh run (cds_init): java -version and ~100 stats are not free.
cds_init() { if cds_enabled; then _cds_key="$(cds_key)" || exit 1; fi; }
cds_archive() { echo "$kdir/cds/${_cds_key:?cds_init first}.jsa"; }
cds_lists() { echo "$kdir/cds/${_cds_key:?cds_init first}.lists"; }

# JVM flags for one JVM: map the archive, or record a class list named <name> for building it.
cds_opts() {
  local name="$1" archive
  cds_enabled || return 0
  archive="$(cds_archive)" || exit 1
  if [[ -f "$archive" ]]; then
    echo "-XX:SharedArchiveFile=$archive"
  else
    mkdir -p "${archive%.jsa}.lists"
    echo "-XX:DumpLoadedClassList=${archive%.jsa}.lists/$name.classlist"
  fi
}

# Where a health-check tool run records its classes (empty: nothing to record).
cds_tool_list() {
  cds_enabled && [[ ! -f "$(cds_archive)" ]] && echo "$(cds_lists)/tool-$1.classlist"
  return 0
}

cds_builder_pid() {
  local pid
  pid="$(cat "$tb/pids/kafka-cds.pid" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Start the background dump when there is no archive yet and both roles have recorded a list.
cds_build_async() {
  local archive lists cp
  cds_enabled || return 0
  archive="$(cds_archive)" && lists="$(cds_lists)" && cp="$(kafka_classpath)" || exit 1
  [[ -f "$archive" ]] && return 0
  cds_builder_pid > /dev/null && return 0
  compgen -G "$lists/node-10[0-9].classlist" > /dev/null && compgen -G "$lists/node-[0-9].classlist" > /dev/null ||
    return 0
  # Lists of running JVMs may end in a partial line; the dump skips a name it cannot load.
  awk '!seen[$0]++' "$lists"/*.classlist > "$lists/merged"
  say "building the class data sharing archive in the background: $archive (log $tb/logs/kafka-cds.log)"
  # shellcheck disable=SC2016
  nohup setsid nice -n 10 bash -c 'echo $$ > "$0"; java -Xmx512m -Xshare:dump \
      -XX:SharedClassListFile="$1" -XX:SharedArchiveFile="$2.tmp" -cp "$3" &&
      mv "$2.tmp" "$2" && echo "archive ready: $2"; rm -f "$0"' \
    "$tb/pids/kafka-cds.pid" "$lists/merged" "$archive" "$cp" > "$tb/logs/kafka-cds.log" 2>&1 < /dev/null &
}

cds_stop_builder() {
  local pid
  pid="$(cds_builder_pid)" || { rm -f "$tb/pids/kafka-cds.pid"; return 0; }
  pkill -TERM -P "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  rm -f "$tb/pids/kafka-cds.pid"
  say "stopped the class data sharing archive build (pid $pid)"
}
