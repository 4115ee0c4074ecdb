#!/usr/bin/env bash
# Container images for the test bed's real node (kubelet + containerd + runc), built locally with
# buildah from Debian packages: nothing is pulled from an image registry.
#
#   images.sh build [base|pause|operator|kafka|coredns|rust|all]   (default all; rust = the
#                                           builder base of operator-full, not in all)
#   images.sh import          # every archive in current.list -> containerd namespace k8s.io
#   images.sh operator-full   # the top-level Dockerfile's full multi-stage build (make image)
#   images.sh list            # print current.list
#
# Each image is cached as an OCI archive $KOO_CACHE/images/<name>-<inputs-hash>.tar; the hash
# covers everything the image is made of (Dockerfile, context files, base image digest, binary,
# this script's recipe for it), so a warm run rebuilds nothing. After `build`,
# $KOO_CACHE/images/current.list has one line `<ref> <archive>` per image (written atomically).
# Every archive carries its full reference (org.opencontainers.image.ref.name), so
# `ctr -n k8s.io images import` names it exactly as the kubelet looks it up:
#   localhost/koo-debian:bookworm-slim            local stand-in for debian:bookworm-slim
#   registry.k8s.io/pause:3.10                    containerd's sandbox_image (images/pause)
#   docker.io/library/kafka-observer-operator:dev (`kafka-observer-operator:dev` in pod specs)
#   docker.io/kafka-observer/kafka:4.1.2          (`kafka-observer/kafka:<KAFKA_VERSION>`)
#   docker.io/kafka-observer/coredns:<ver>        (`kafka-observer/coredns:<ver>`, <ver> as in
#                                                 node-tools.sh's COREDNS_VERSION, e.g. v1.15.0)
# Logs go to stderr and to $KOO_CACHE/images/logs/<step>.log; stdout stays empty.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
log_tag="images.sh" die_prefix="error: "

IMG_DIR="$KOO_CACHE/images"
LOG_DIR="$IMG_DIR/logs"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

BASE_REF="localhost/koo-debian:$DEBIAN_SUITE-slim"
RUST_REF="localhost/koo-rust:1.95-$DEBIAN_SUITE"
PAUSE_REF="registry.k8s.io/pause:3.10"
OPERATOR_REF="docker.io/library/kafka-observer-operator:dev"
KAFKA_REF="docker.io/kafka-observer/kafka:$KAFKA_VERSION"

# buildah's own store lives in the cache (survives runs, never touches /var/lib/containers).
# vfs, not overlay: vfs needs no kernel mounts and works on any filesystem and inside a
# container, so the same script runs on CI runners whatever their storage; the price (a full copy
# per layer) is small for these few-layer images. Isolation chroot: no user namespaces, no
# runc-in-buildah; RUN steps share the host's network, which is how apt reaches the mirror.
BUILDAH_ROOT="$KOO_CACHE/buildah/root"
BUILDAH_RUNROOT="$KOO_CACHE/buildah/runroot"
export BUILDAH_ISOLATION=chroot
# No registries at all: a FROM that is not in the local store must fail, never pull.
BUILDAH_REGISTRIES_CONF="$KOO_CACHE/buildah/registries.conf"

bh() { buildah --root "$BUILDAH_ROOT" --runroot "$BUILDAH_RUNROOT" --storage-driver vfs \
  --registries-conf "$BUILDAH_REGISTRIES_CONF" "$@"; }

# run <step> <command...>: the command's output goes to $LOG_DIR/<step>.log (and stderr when
# KOO_IMAGES_VERBOSE=1); a failure names the step and its log and shows its tail.
run() {
  local step="$1" log="$LOG_DIR/$1.log"; shift
  mkdir -p "$LOG_DIR"
  {
    # shellcheck disable=SC2312 # message text only
    echo "### $(date -u +%FT%TZ) $*"
  } >> "$log"
  if [[ "${KOO_IMAGES_VERBOSE:-0}" == 1 ]]; then
    "$@" 2>&1 | tee -a "$log" >&2 || { log "step '$step' failed: see $log"; exit 1; }
  else
    "$@" >> "$log" 2>&1 || {
      log "step '$step' failed; last lines of $log:"
      tail -n 25 "$log" | sed 's/^/  | /' >&2
      die "step '$step' failed: see $log"
    }
  fi
}

setup() {
  mkdir -p "$IMG_DIR" "$LOG_DIR" "$BUILDAH_ROOT" "$BUILDAH_RUNROOT" "$KOO_CACHE/buildah/tmp"
  # buildah's temp files and its RUN --mount=type=cache dirs (buildah-cache-0) live under
  # $TMPDIR (else /var/tmp): keep them in the cache too.
  export TMPDIR="$KOO_CACHE/buildah/tmp"
  command -v buildah >/dev/null || die "buildah is not installed (apt-get install buildah)"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(id -u)" == 0 ]] || die "run as root (buildah chroot isolation and debootstrap need it)"
  [[ -f "$BUILDAH_REGISTRIES_CONF" ]] || cat > "$BUILDAH_REGISTRIES_CONF" <<'EOF'
# Written by e2e/build/images.sh: no search registries, so short names never reach a registry.
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
}

# Hash of a directory's files (paths, modes, contents) plus extra strings.
inputs_hash() {
  local dir="$1"; shift
  {
    (cd "$dir" && find . \( -type f -o -type l \) -printf '%p %m\n' | LC_ALL=C sort)
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
    printf '%s\n' "$@"
  } | sha256sum | cut -c1-16
}

# The config digest (= image id in containers-storage) and manifest digest of an OCI archive.
archive_manifest_digest() { tar -xOf "$1" index.json | jq -r '.manifests[0].digest'; }
archive_config_digest() {
  local m; m="$(archive_manifest_digest "$1")"
  tar -xOf "$1" "blobs/sha256/${m#sha256:}" | jq -r '.config.digest'
}
archive_ref() { tar -xOf "$1" index.json | jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"] // ""'; }

# Make sure buildah's store has <ref> with exactly the archive's content (a later FROM needs it).
ensure_in_store() {
  local ref="$1" archive="$2" want have
  want="$(archive_config_digest "$archive")"; want="${want#sha256:}"
  have="$(bh images --noheading --no-trunc --format '{{.ID}}' "$ref" 2>/dev/null | head -n1 || true)"
  have="${have#sha256:}"
  [[ "$have" == "$want" ]] && return 0
  log "loading $ref into buildah's store from $archive"
  run "load-$(basename "$archive" .tar)" bh pull --quiet "oci-archive:$archive"
  run "load-$(basename "$archive" .tar)" bh tag "$want" "$ref"
}

# push_archive <ref> <archive> <step>: write the image in the store to the archive, atomically.
push_archive() {
  local ref="$1" archive="$2" step="$3"
  rm -f "$archive.tmp"
  run "$step" bh push --quiet "$ref" "oci-archive:$archive.tmp:$ref"
  # shellcheck disable=SC2312 # a failed read compares unequal: the test is false, the safe answer
  [[ "$(archive_ref "$archive.tmp")" == "$ref" ]] ||
    die "step '$step': $archive.tmp does not carry the reference $ref"
  mv -f "$archive.tmp" "$archive"
}

# Remove older archives of the same image (other hashes), keeping the current one.
prune_old() {
  local name="$1" keep="$2" f
  for f in "$IMG_DIR/$name"-*.tar; do
    [[ -e "$f" && "$f" != "$keep" ]] || continue
    [[ "$(basename "$f")" =~ ^$name-[0-9a-f]{16}\.tar$ ]] || continue
    rm -f "$f"
  done
}

# Temporary build contexts and rootfs dirs carry this process's pid; the EXIT trap removes them
# whatever happens (a half-debootstrapped rootfs may still have /proc mounted: one filesystem only).
new_ctx() { mktemp -d "$IMG_DIR/ctx.$$.XXXXXX"; }
cleanup() {
  local d
  for d in "$IMG_DIR"/ctx.$$.* "$IMG_DIR"/rootfs.$$.*; do
    [[ -e "$d" ]] || continue
    mountpoint -q "$d/proc" 2>/dev/null && umount "$d/proc" 2>/dev/null
    mountpoint -q "$d/sys" 2>/dev/null && umount "$d/sys" 2>/dev/null
    rm -rf --one-file-system "$d"
  done
}
trap cleanup EXIT

declare -A BUILT # ref -> archive, for current.list
elapsed() { echo "$((SECONDS - $1))"; }

# ---------------------------------------------------------------------------------------------
# base: debootstrap minbase + what a debian:bookworm-slim user expects.
base_rootfs() {
  local rootfs="$1"
  debootstrap --variant=minbase "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR"
  # As debian:*-slim: deb822 sources with updates and security, no docs/man/locales from later
  # installs, apt caches cleaned after every install, no recommends kept as auto-removable.
  rm -f "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: $DEBIAN_SUITE $DEBIAN_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $DEBIAN_SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in debian:*-slim: no documentation, man pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' > "$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' > "$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'APT::AutoRemove::SuggestsImportant "false";' > "$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  # Security updates now, so the base is what debian:bookworm-slim is today.
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c 'apt-get update && apt-get -y upgrade && apt-get clean'
  # Slim: drop what the excludes would have kept out.
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/* "$rootfs"/usr/share/locale/*/
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old "$rootfs"/var/log/* "$rootfs"/tmp/* \
    "$rootfs"/var/tmp/* "$rootfs/debootstrap"
  # The runtime provides these per container.
  rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  : > "$rootfs/etc/machine-id"
  mkdir -p "$rootfs/var/log/apt"
}

BASE_RECIPE="2: config PATH, CMD bash, label; tar -p import"
build_base() {
  local key archive rootfs ctr mnt t0=$SECONDS
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  # Keyed by the recipe (base_rootfs's text, the image config below via BASE_RECIPE), not by
  # the packages' bytes: a re-debootstrap gets today's security updates only when the key moves
  # (bump BASE_RECIPE, or delete the archive, to refresh).
  key="$(printf '%s\n' "$DEBIAN_SUITE" "$DEBIAN_MIRROR" "$BASE_RECIPE" "$(declare -f base_rootfs)" | sha256sum | cut -c1-16)"
  archive="$IMG_DIR/koo-debian-$DEBIAN_SUITE-slim-$key.tar"
  if [[ -f "$archive" ]]; then
    log "base: cached $archive"
  else
    log "base: debootstrap $DEBIAN_SUITE (minbase) from $DEBIAN_MIRROR (about 80-120 s)"
    rootfs="$(mktemp -d "$IMG_DIR/rootfs.$$.XXXXXX")"
    run base-debootstrap base_rootfs "$rootfs"
    # `buildah copy` would chown everything to 0:0 (Dockerfile COPY semantics) and lose setgid
    # groups (shadow, mail...), so the rootfs goes in through `buildah mount` with tar -p.
    ctr="$(bh from --quiet scratch)"
    mnt="$(bh mount "$ctr")"
    run base-import sh -c "tar -C '$rootfs' -cf - . | tar -C '$mnt' -xpf - --numeric-owner"
    bh umount "$ctr" >/dev/null
    run base-commit bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --cmd '["bash"]' --os linux --arch amd64 \
      --label "org.opencontainers.image.description=debootstrap --variant=minbase $DEBIAN_SUITE, slimmed like debian:$DEBIAN_SUITE-slim (kafka-observer-operator e2e/build/images.sh)" \
      "$ctr"
    run base-commit bh commit --quiet --rm "$ctr" "$BASE_REF"
    push_archive "$BASE_REF" "$archive" base-push
    rm -rf --one-file-system "$rootfs"
    prune_old "koo-debian-$DEBIAN_SUITE-slim" "$archive"
    # shellcheck disable=SC2312 # message text only
    log "base: built $BASE_REF in $(elapsed "$t0") s: $archive ($(du -h "$archive" | cut -f1))"
  fi
  ensure_in_store "$BASE_REF" "$archive"
  BASE_ARCHIVE="$archive"
  BUILT[$BASE_REF]="$archive"
}

# bud_cached <name> <ref> <ctx> <step> <key> [buildah bud args...]
# Builds <ctx>/Dockerfile into <ref> unless the archive for <key> exists; $PREPARE (a command)
# runs first when a build is needed.
bud_cached() {
  local name="$1" ref="$2" ctx="$3" step="$4" key="$5" archive t0=$SECONDS
  shift 5
  # The archive holds the image under its ref, so the ref is part of the key: an archive of an
  # earlier tag would import under that tag, not the one the manifests name.
  key="$(printf '%s %s' "$key" "$ref" | sha256sum | cut -c1-16)"
  archive="$IMG_DIR/$name-$key.tar"
  if [[ -f "$archive" ]]; then
    log "$step: cached $archive"
  else
    log "$step: building $ref"
    if [[ -n "${PREPARE:-}" ]]; then $PREPARE; fi
    run "$step" bh bud --isolation chroot --pull=never --layers=false --format oci \
      --timestamp 0 -t "$ref" "$@" "$ctx"
    push_archive "$ref" "$archive" "$step-push"
    prune_old "$name" "$archive"
    # shellcheck disable=SC2312 # message text only
    log "$step: built $ref in $(elapsed "$t0") s: $archive ($(du -h "$archive" | cut -f1))"
  fi
  BUILT[$ref]="$archive"
}

# ---------------------------------------------------------------------------------------------
build_pause() {
  local ctx key
  command -v gcc >/dev/null || die "pause: gcc is not installed"
  ctx="$(new_ctx)"
  cp "$root/images/pause/Dockerfile" "$root/images/pause/pause.c" "$ctx/"
  # Keyed by the source, the compiler and the flags; the binary is compiled only when needed.
  # shellcheck disable=SC2312 # gcc --version and declare -f only add to the cache key; gcc missing fails the build itself
  key="$(inputs_hash "$ctx" "$(gcc --version | head -n1)" "$(declare -f compile_pause)")"
  PAUSE_CTX="$ctx" PREPARE=compile_pause bud_cached pause "$PAUSE_REF" "$ctx" pause "$key" \
    --platform linux/amd64
  rm -rf "$ctx"
}
# Static, so the image needs nothing but the binary (FROM scratch).
compile_pause() {
  run pause-gcc gcc -static -Os -Wall -Wextra -Werror -o "$PAUSE_CTX/pause" "$PAUSE_CTX/pause.c"
  run pause-gcc strip "$PAUSE_CTX/pause"
  run pause-gcc file "$PAUSE_CTX/pause"
  rm -f "$PAUSE_CTX/pause.c"
}

# Wait for a cargo build that holds the target dir's lock (e.g. a running `make build`); cargo
# takes an flock on <target>/release/.cargo-lock for the whole build.
wait_for_cargo() {
  local lock="$CARGO_TARGET_DIR/release/.cargo-lock" t0=$SECONDS
  [[ -f "$lock" ]] || return 0
  if ! flock -n "$lock" true 2>/dev/null; then
    log "operator: a cargo build holds $lock; waiting for it (up to 60 min)"
    flock -w 3600 "$lock" true || die "operator: cargo still building after 60 min ($lock)"
    # shellcheck disable=SC2312 # message text only
    log "operator: cargo build finished after $(elapsed "$t0") s"
  fi
}

build_operator() {
  local bin="$CARGO_TARGET_DIR/release/kafka-observer-operator" ctx
  wait_for_cargo
  [[ -x "$bin" ]] || die "operator: no binary $bin: run 'make build' first (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
  ctx="$(new_ctx)"
  cp "$root/Dockerfile" "$ctx/Dockerfile"
  cp -l "$bin" "$ctx/kafka-observer-operator" 2>/dev/null || cp "$bin" "$ctx/kafka-observer-operator"
  # shellcheck disable=SC2312 # archive_config_digest of an archive built just before; a wrong key only rebuilds
  bud_cached kafka-observer-operator "$OPERATOR_REF" "$ctx" operator \
    "$(inputs_hash "$ctx" "base=$(archive_config_digest "$BASE_ARCHIVE")" prebuilt)" \
    --target prebuilt --build-arg "RUNTIME_IMAGE=$BASE_REF"
  rm -rf "$ctx"
}

build_kafka() {
  local jars patch ctx f
  log "kafka: Kafka $KAFKA_VERSION jars and observer patch (cached builds return at once)"
  run kafka-jars bash "$here/kafka-jars.sh" "$KAFKA_VERSION"
  jars="$(tail -n1 "$LOG_DIR/kafka-jars.log")/lib"
  [[ -f "$jars/kafka_$SCALA_BINARY_VERSION-$KAFKA_VERSION.jar" ]] ||
    die "kafka: no Kafka jars in '$jars' (step kafka-jars: see $LOG_DIR/kafka-jars.log)"
  run kafka-patched bash "$here/kafka-patched.sh" "$KAFKA_VERSION"
  patch="$(tail -n1 "$LOG_DIR/kafka-patched.log")"
  [[ "$patch" == *.jar && -f "$patch" ]] ||
    die "kafka: kafka-patched.sh did not name a jar (got '$patch'): see $LOG_DIR/kafka-patched.log"
  ctx="$(new_ctx)"
  mkdir -p "$ctx/libs"
  for f in "$jars"/*.jar; do cp -l "$f" "$ctx/libs/" 2>/dev/null || cp "$f" "$ctx/libs/"; done
  cp "$patch" "$ctx/observer-patch.jar"
  cp "$root/images/kafka/"* "$ctx/"
  # shellcheck disable=SC2312 # archive_config_digest of an archive built just before; a wrong key only rebuilds
  bud_cached kafka "$KAFKA_REF" "$ctx" kafka \
    "$(inputs_hash "$ctx" "base=$(archive_config_digest "$BASE_ARCHIVE")" "$KAFKA_VERSION")" \
    --build-arg "BASE_IMAGE=$BASE_REF" --build-arg "KAFKA_VERSION=$KAFKA_VERSION"
  rm -rf "$ctx"
}

# The coredns binary e2e/build/node-tools.sh builds (asked with `node-tools.sh paths`, which
# builds nothing: building it is node-tools.sh's job, e.g. `node-tools.sh coredns`).
coredns_bin() {
  local line bin
  [[ -f "$here/node-tools.sh" ]] || return 1
  line="$(bash "$here/node-tools.sh" paths 2>/dev/null | grep '^coredns=' | tail -n1)" || return 1
  bin="${line#coredns=}"
  [[ -n "$bin" && -x "$bin" ]] || return 1
  "$bin" -version >/dev/null 2>&1 || return 1 # a complete, runnable binary
  echo "$bin"
}

build_coredns() {
  local bin ver ctx
  bin="$(coredns_bin)" ||
    die "coredns: no coredns binary yet: build it with 'bash e2e/build/node-tools.sh coredns' (its path: 'bash e2e/build/node-tools.sh paths')"
  # The directory is coredns-<version>-<plugin list hash> (e.g. coredns-v1.15.0-c2293c8c): the
  # tag is the version alone, as e2e/testbed/manifests/coredns.yaml names it. (With the hash in
  # the tag a machine without an older image had none the manifest names: a cold bed's CoreDNS
  # never started, ErrImageNeverPull.)
  ver="$(basename "$(dirname "$bin")")"; ver="${ver#coredns-}"; ver="${ver%-*}"
  [[ "$ver" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "coredns: cannot tell the version from $bin (got '$ver')"
  grep -q "image: kafka-observer/coredns:$ver\$" "$root/e2e/testbed/manifests/coredns.yaml" ||
    die "coredns: e2e/testbed/manifests/coredns.yaml does not name kafka-observer/coredns:$ver"
  ctx="$(new_ctx)"
  cp -l "$bin" "$ctx/coredns" 2>/dev/null || cp "$bin" "$ctx/coredns"
  cat > "$ctx/Dockerfile" <<'EOF'
# CoreDNS for the local node, from the static binary e2e/build/node-tools.sh builds.
FROM scratch
COPY coredns /coredns
USER 65532:65532
EXPOSE 53 53/udp
ENTRYPOINT ["/coredns"]
EOF
  # shellcheck disable=SC2312 # inputs_hash only hashes files; a wrong key only rebuilds
  bud_cached coredns "docker.io/kafka-observer/coredns:$ver" "$ctx" coredns "$(inputs_hash "$ctx")" \
    --platform linux/amd64
  rm -rf "$ctx"
}

# ---------------------------------------------------------------------------------------------
write_list() {
  local tmp="$IMG_DIR/current.list.tmp.$$" ref
  for ref in "${!BUILT[@]}"; do echo "$ref ${BUILT[$ref]}"; done | LC_ALL=C sort > "$tmp"
  mv -f "$tmp" "$IMG_DIR/current.list"
  log "wrote $IMG_DIR/current.list:"; sed 's/^/  /' "$IMG_DIR/current.list" >&2
}

cmd_build() {
  local what="${1:-all}" t0=$SECONDS
  setup
  # Every image but pause/coredns needs the base in the store; build/load it first.
  case "$what" in
    base) build_base ;;
    pause) build_pause ;;
    operator) build_base; build_operator ;;
    kafka) build_base; build_kafka ;;
    coredns) build_coredns ;;
    rust) build_base; build_rust_base ;; # the builder base of operator-full; not in all
    all)
      build_base; build_pause; build_kafka; build_operator
      # coredns only once node-tools.sh has built its binary (`images.sh build coredns` insists).
      if coredns_bin >/dev/null; then build_coredns
      else log "coredns: skipped: no binary yet ('bash e2e/build/node-tools.sh coredns' builds it)"
      fi ;;
    *) die "unknown image '$what' (base|pause|operator|kafka|coredns|rust|all)" ;;
  esac
  # A partial build keeps the other lines of the previous list.
  if [[ "$what" != all && -f "$IMG_DIR/current.list" ]]; then
    local ref archive
    while read -r ref archive; do
      [[ -n "${BUILT[$ref]:-}" || ! -f "$archive" ]] || BUILT[$ref]="$archive"
    done < "$IMG_DIR/current.list"
  fi
  write_list
  # shellcheck disable=SC2312 # message text only
  log "build $what: done in $(elapsed "$t0") s"
}

cmd_import() {
  local sock="${KOO_CONTAINERD_SOCK:-}" ref archive want have n=0 skipped=0
  [[ -n "$sock" ]] || die "import: set KOO_CONTAINERD_SOCK to the node's containerd socket"
  [[ -S "$sock" ]] || die "import: $sock is not a socket (is the node's containerd running?)"
  [[ -f "$IMG_DIR/current.list" ]] || die "import: no $IMG_DIR/current.list: run 'images.sh build' first"
  mkdir -p "$LOG_DIR"
  while read -r ref archive; do
    [[ -f "$archive" ]] || die "import: $archive (for $ref) is missing: run 'images.sh build'"
    want="$(archive_manifest_digest "$archive")"
    have="$(ctr --address "$sock" -n k8s.io images ls "name==$ref" 2>/dev/null | awk -v r="$ref" '$1 == r {print $3}')"
    if [[ "$have" == "$want" ]]; then skipped=$((skipped + 1)); continue; fi
    log "import: $ref ($want)"
    run import ctr --address "$sock" -n k8s.io images import --all-platforms "$archive"
    have="$(ctr --address "$sock" -n k8s.io images ls "name==$ref" | awk -v r="$ref" '$1 == r {print $3}')"
    [[ "$have" == "$want" ]] || die "import: after importing $archive, containerd has '$ref' at '$have', not $want (see $LOG_DIR/import.log)"
    n=$((n + 1))
  done < "$IMG_DIR/current.list"
  log "import: $n imported, $skipped already present"
}

# The Rust builder base for the full multi-stage build: the local base + this machine's rustup
# toolchain (the rust:1.95-bookworm equivalent; cargo fetches crates from crates.io).
build_rust_base() {
  local tc="${RUST_TOOLCHAIN_DIR:-$HOME/.rustup/toolchains/1.95.0-x86_64-unknown-linux-gnu}" ctx
  tc="$(readlink -f "$tc")"
  [[ -x "$tc/bin/cargo" ]] || die "operator-full: no Rust toolchain at $tc (set RUST_TOOLCHAIN_DIR)"
  "$tc/bin/rustc" --version | grep -q '^rustc 1\.95\.' || die "operator-full: $tc is not Rust 1.95"
  ctx="$(new_ctx)"
  mkdir -p "$ctx/rust"
  # The toolchain without its HTML docs (share/doc is ~700 MB).
  (cd "$tc" && tar -cf - --exclude=./share/doc .) | tar -C "$ctx/rust" -xf -
  # This machine's CA bundle (public certificates only): where HTTPS goes through a
  # TLS-inspecting proxy, Debian's bundle alone fails crates.io with "self-signed certificate in
  # certificate chain". A separate file plus env, so a later update-ca-certificates keeps it.
  cp "${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" "$ctx/host-ca-certificates.crt" ||
    die "operator-full: no CA bundle at ${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt} (set HOST_CA_BUNDLE)"
  cat > "$ctx/Dockerfile" <<'EOF'
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates gcc g++ libc6-dev make git \
 && rm -rf /var/lib/apt/lists/*
COPY rust/ /usr/local/rust/
COPY host-ca-certificates.crt /etc/ssl/host-ca-certificates.crt
ENV CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CARGO_HTTP_CAINFO=/etc/ssl/host-ca-certificates.crt SSL_CERT_FILE=/etc/ssl/host-ca-certificates.crt \
    GIT_SSL_CAINFO=/etc/ssl/host-ca-certificates.crt
RUN mkdir -p /usr/local/cargo/bin && cargo --version && rustc --version
EOF
  # shellcheck disable=SC2312 # archive_config_digest of an archive built just before; a wrong key only rebuilds
  bud_cached koo-rust "$RUST_REF" "$ctx" rust-base \
    "$(inputs_hash "$ctx" "base=$(archive_config_digest "$BASE_ARCHIVE")")" \
    --build-arg "BASE_IMAGE=$BASE_REF"
  rm -rf "$ctx"
  ensure_in_store "$RUST_REF" "${BUILT[$RUST_REF]}"
  unset 'BUILT[$RUST_REF]' # a builder image: never in current.list, never imported into the node
}

cmd_operator_full() {
  local t0=$SECONDS t1
  setup
  build_base
  build_rust_base
  t1=$SECONDS
  # The repository itself is the context (.dockerignore drops target/, .testbed/, .git/).
  # The cargo registry and target dir are cache mounts kept in buildah's store between builds.
  log "operator-full: cargo build --release inside the image (cold: several minutes)"
  run operator-full bh bud --isolation chroot --pull=never --layers=false --format oci \
    --build-arg "BUILDER_IMAGE=$RUST_REF" --build-arg "RUNTIME_IMAGE=$BASE_REF" \
    -t docker.io/library/kafka-observer-operator:full -f "$root/Dockerfile" "$root"
  # shellcheck disable=SC2312 # message text only
  log "operator-full: built docker.io/library/kafka-observer-operator:full in $(elapsed "$t1") s (total $(elapsed "$t0") s; log $LOG_DIR/operator-full.log)"
}

case "${1:-build}" in
  build) shift || true; cmd_build "${1:-all}" ;;
  import) cmd_import ;;
  operator-full) cmd_operator_full ;;
  list) cat "$IMG_DIR/current.list" >&2 ;;
  *) die "usage: images.sh build [base|pause|operator|kafka|coredns|rust|all] | import | operator-full | list" ;;
esac
