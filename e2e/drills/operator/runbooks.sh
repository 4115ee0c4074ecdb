#!/usr/bin/env bash
# The runbooks' commands, run as written (docs/runbooks.md): every command of every ```sh block,
# section by section, against the real bed with the operator installed by its chart (run it
# after the operator drills (run.sh), before the chart's operator pods make way). A command passes when it
# exits 0 and prints something; it fails the test otherwise, and the test prints what it said.
#
# What the test does around the commands, and nothing more:
# - PATH: the bed's kubectl, helm and Kafka tool wrappers (.testbed/bin), and the plugin as
#   `kubectl-observer`. The bed runs outside the cluster, so KUBECTL_OBSERVER_BOOTSTRAP names a
#   listener it can reach (the plugin's documented environment variable for --bootstrap).
# - Placeholders are filled in: <broker:9092> and <b> the bootstrap address, <topic> and <p> a
#   topic of this test's own, <pod> the operator pod holding the Lease, <new> the image tag the
#   chart runs now (so `helm upgrade` changes nothing). An unknown placeholder fails the test.
# - A watch (-w, --watch) runs for 5 s (it never ends by itself) and must have printed something.
# - A command ending in `&` (port-forward) runs in the background until its section ends; the test
#   waits until its local port answers.
# - A pipeline ending in grep passes on "no match" too: searching and finding nothing is an answer.
# - Each section starts from the ObserverSet's spec.promotion as the test found it (a runbook is
#   one incident, not the aftermath of the previous one), and the test puts it back at the end.
# Prints `RUNBOOK <section>: PASS <n> commands` per section and `RUNBOOKS PASS <n> commands <s>s`.
set -euo pipefail
source "$(dirname "$0")/../../lib.sh"
log_time="%T" log_fd=1
tb="${KOO_TESTBED:-$tb}"
[[ "$tb" != off ]] || { echo "runbooks: SKIP (KOO_TESTBED=off)"; exit 0; }
[[ -f "$tb/kubeconfig" ]] || { echo "runbooks: no test bed at $tb: run make testbed-up"; exit 1; }
doc="$root/docs/runbooks.md"
ns=kafka
set_name=kafka
# Under `make test` (KOO_BUILD_TESTS=1) the test targets are selected too, so this is the binary
# the earlier stages built, not a second compile with other dependency features.
cargo build --quiet --release --bin kubectl-observer ${KOO_BUILD_TESTS:+--tests}

work="$(mktemp -d "${TMPDIR:-/tmp}/koo-runbooks.XXXXXX")"
mkdir -p "$work/bin"
ln -s "$CARGO_TARGET_DIR/release/kubectl-observer" "$work/bin/kubectl-observer"
export PATH="$work/bin:$tb/bin:$PATH" KUBECONFIG="$tb/kubeconfig"
bootstrap="$(bash "$root/e2e/testbed/kafka.sh" bootstrap)"
export KUBECTL_OBSERVER_BOOTSTRAP="$bootstrap"
topic="runbooks-$(date +%s)"
t0=$SECONDS

bg_pids=()
stop_bg() {
  local p
  for p in "${bg_pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  bg_pids=()
}

# spec.promotion as found, put back before each section and at the end.
saved_promotion="$(kubectl -n "$ns" get obs "$set_name" -o json | jq -c '.spec.promotion // {}')"
restore() {
  local now
  now="$(kubectl -n "$ns" get obs "$set_name" -o json | jq -c '.spec.promotion // {}')"
  if [[ "$now" != "$saved_promotion" ]]; then
    kubectl -n "$ns" patch obs "$set_name" --type json \
      -p "[{\"op\":\"add\",\"path\":\"/spec/promotion\",\"value\":$saved_promotion}]" >/dev/null
  fi
  # Ready for the current generation: the operator has rolled out what the spec says.
  local deadline=$((SECONDS + 180)) s
  while :; do
    s="$(kubectl -n "$ns" get obs "$set_name" -o json |
      jq -r '"\(.metadata.generation == .status.observedGeneration) \(.status.phase)"')"
    [[ "$s" == "true Ready" ]] && return 0
    ((SECONDS < deadline)) || { log "ObserverSet $ns/$set_name not Ready after 180 s ($s)"; return 1; }
    sleep 1
  done
}
cleanup() {
  stop_bg
  restore || true
  kafka-topics --bootstrap-server "$bootstrap" --delete --topic "$topic" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

kafka-topics --bootstrap-server "$bootstrap" --create --topic "$topic" \
  --replica-assignment 1:2:4 --config min.insync.replicas=2 >/dev/null
lease_holder="$(kubectl -n kafka-observer-system get lease kafka-observer-operator \
  -o jsonpath='{.spec.holderIdentity}')"
[[ -n "$lease_holder" ]] || { log "FAIL: no operator holds the Lease (is the chart's operator running?)"; exit 1; }
image_tag="$(helm get values kafka-observer-operator -n kafka-observer-system -a -o json | jq -r '.image.tag')"

# One logical command per record: fenced ```sh blocks only, continuation lines joined, comment
# lines dropped; each record is "<section>\t<command>".
commands() {
  awk '
    # The line up to a "#" that starts a comment: after a blank, outside quotes.
    function uncomment(l,   i, c, q, prev) {
      q = ""; prev = " "
      for (i = 1; i <= length(l); i++) {
        c = substr(l, i, 1)
        if (q == "" && c == "#" && prev ~ /[[:space:]]/) return substr(l, 1, i - 1)
        if (q == "" && (c == "\x27" || c == "\"")) q = c
        else if (c == q) q = ""
        prev = c
      }
      return l
    }
    /^## / { section = substr($0, 4); next }
    /^[[:space:]]*```sh[[:space:]]*$/ { inblock = 1; indent = index($0, "`") - 1; next }
    inblock && /^[[:space:]]*```[[:space:]]*$/ { inblock = 0; next }
    inblock {
      line = uncomment(substr($0, indent + 1))
      if (line ~ /^[[:space:]]*$/) next
      cmd = cmd (cmd == "" ? "" : " ") line
      if (line ~ /\\$/) { sub(/\\$/, "", cmd); next }
      gsub(/[[:space:]]+/, " ", cmd); sub(/ $/, "", cmd)
      print section "\t" cmd
      cmd = ""
    }
  ' "$doc"
}

fill() {
  local c="$1"
  c="${c//<broker:9092>/$bootstrap}"
  c="${c//<b>/$bootstrap}"
  c="${c//<topic>/$topic}"
  c="${c//<p>/0}"
  c="${c//<pod>/$lease_holder}"
  c="${c//<new>/$image_tag}"
  if [[ "$c" =~ \<[A-Za-z][A-Za-z0-9:._-]*\> ]]; then
    log "FAIL: unknown placeholder ${BASH_REMATCH[0]} in: $1 (teach runbooks.sh what it stands for)"
    exit 1
  fi
  printf '%s' "$c"
}

# Runs one command from the repository root; returns non-zero with its output shown on failure.
run_one() {
  local cmd="$1" out="$work/out" rc=0 port
  if [[ "$cmd" =~ \&[[:space:]]*$ ]]; then
    cmd="${cmd%&*}"
    [[ "$cmd" == *port-forward* ]] ||
      { log "FAIL: a background command that is not a port-forward: $cmd"; return 1; }
    port="$(grep -oE '[0-9]+[[:space:]]*$' <<<"$cmd" | tr -d ' ')"
    setsid bash -c "cd '$root' && exec $cmd" >"$work/bg.$port.log" 2>&1 </dev/null &
    bg_pids+=($!)
    local deadline=$((SECONDS + 20))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
      ((SECONDS < deadline)) || { log "FAIL: $cmd: port $port not open after 20 s"; cat "$work/bg.$port.log"; return 1; }
      sleep 0.5
    done
    return 0
  fi
  if [[ "$cmd" =~ (^|[[:space:]])(-w|--watch)([[:space:]]|$) ]]; then
    (cd "$root" && timeout 5 bash -o pipefail -c "$cmd") </dev/null >"$out" 2>&1 || rc=$?
    if [[ $rc == 124 && -s "$out" ]]; then rc=0; fi
  else
    (cd "$root" && timeout 120 bash -o pipefail -c "$cmd") </dev/null >"$out" 2>&1 || rc=$?
    # grep's "no match" (1) at the end of a pipeline is an answer, not an error.
    if [[ $rc == 1 && "$cmd" =~ \|[[:space:]]*grep[^|]*$ ]]; then rc=0; fi
  fi
  # A runbook command that prints nothing tells the reader nothing (grep's "no match" aside).
  if [[ $rc == 0 && ! -s "$out" && ! "$cmd" =~ \|[[:space:]]*grep[^|]*$ ]]; then
    log "FAIL: no output from: $cmd"
    return 1
  fi
  if [[ $rc != 0 ]]; then
    log "FAIL (exit $rc): $cmd"
    sed 's/^/    /' "$out" | tail -n 20
    return 1
  fi
  head -n 3 "$out" | cut -c1-160 | sed 's/^/    | /'
}

total=0 section="" n=0
finish_section() {
  [[ -n "$section" ]] || return 0
  stop_bg
  echo "RUNBOOK $section: PASS $n commands"
}
# shellcheck disable=SC2312 # commands only extracts lines of a file; none found fails the count check below
while IFS=$'\t' read -r sec raw; do
  if [[ "$sec" != "$section" ]]; then
    finish_section
    section="$sec" n=0
    restore
  fi
  cmd="$(fill "$raw")"
  log "[$section] $cmd"
  run_one "$cmd" || { echo "RUNBOOK $section: FAIL"; exit 1; }
  n=$((n + 1)) total=$((total + 1))
done < <(commands)
finish_section
((total > 0)) || { log "FAIL: no commands found in $doc"; exit 1; }
echo "RUNBOOKS PASS $total commands $((SECONDS - t0))s"
