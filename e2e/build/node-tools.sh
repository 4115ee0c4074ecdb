#!/usr/bin/env bash
# Build the node-side tools of the test bed's real node from the Go module proxy into
# $KOO_CACHE/node-tools: the CNI plugins, crictl and CoreDNS (the bed's cluster DNS, imported as an
# image by the node scripts). Idempotent: each finished part leaves a stamp and is skipped next time.
#
# Usage: e2e/build/node-tools.sh [cni|crictl|coredns|all ...]   (default: all)
#          logs go to stderr; stdout gets one line per part, the path of what it built or found
#          (cni: the bin dir, crictl and coredns: the binary), so `node-tools.sh coredns | tail -n1`
#          is the CoreDNS binary.
#        e2e/build/node-tools.sh paths    prints sourceable cni_bin_dir=, crictl=, coredns= lines
#          (builds nothing; the paths may not exist yet)
#
# The CNI plugins and crictl have no replace directives, so `go install module/pkg@version` builds
# each with exactly its own go.mod and go.sum (no wrapper module as k8s.sh needs for Kubernetes);
# CoreDNS is built from a main package of our own that imports only the plugins the bed uses.
# The version variables below can be overridden from the environment (they will move to versions.env).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
log_tag="node-tools.sh" log_time="%T"

CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"   # github.com/containernetworking/plugins
CRICTL_VERSION="${CRICTL_VERSION:-v1.34.0}"             # sigs.k8s.io/cri-tools, matches K8S_VERSION's minor
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"           # github.com/coredns/coredns (go 1.26.0 in its go.mod)
# The plugins (package names under github.com/coredns/coredns/plugin/) the bed's Corefile uses
# (e2e/testbed/manifests/coredns.yaml; `prometheus` is package metrics). Upstream's default set
# adds the cloud DNS plugins and their SDKs, which took most of a cold build (190 s).
COREDNS_PLUGINS="${COREDNS_PLUGINS:-errors health ready kubernetes metrics cache reload loadbalance template}"
# The plugins a containerd bridge network needs (bridge, host-local, loopback, portmap) plus the
# usual companions of a default conflist. dhcp is a daemon and not built.
CNI_PLUGINS="${CNI_PLUGINS:-bridge host-local loopback portmap bandwidth firewall tuning ptp static host-device}"

export CGO_ENABLED=0 GOTOOLCHAIN=local
tools_root="$KOO_CACHE/node-tools"
cni_root="$tools_root/cni-$CNI_PLUGINS_VERSION"
crictl_root="$tools_root/crictl-$CRICTL_VERSION"
coredns_root="$tools_root/coredns-$COREDNS_VERSION-$(echo "$COREDNS_PLUGINS" | sha256sum | cut -c1-8)"

# Prints the go.sum-style hash of a module zip: the honest "commit" of a proxy-built binary,
# since the proxy does not tell us the git commit of a tag (as in k8s.sh).
module_sum() {
  (cd "$tools_root" && go mod download -json "$1@$2" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p')
}

# install_to DIR LDFLAGS PKG@VERSION... : go install into DIR.tmp, then move the binaries into DIR.
install_to() {
  local dir="$1" ldflags="$2"; shift 2
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp" "$dir"
  (cd "$tools_root" && GOBIN="$dir.tmp" go install -trimpath -ldflags "$ldflags" "$@")
  mv -f "$dir.tmp"/* "$dir/"; rmdir "$dir.tmp"
}

cni_pkg() {   # plugin name -> package path inside the module
  local m=github.com/containernetworking/plugins/plugins d
  for d in main ipam meta; do
    # shellcheck disable=SC2312 # go env prints a path; a wrong one makes the test false and the plugin is built
    if [[ -d "$(go env GOMODCACHE)/github.com/containernetworking/plugins@$CNI_PLUGINS_VERSION/plugins/$d/$1" ]]; then
      echo "$m/$d/$1"; return
    fi
  done
  log "no CNI plugin named '$1' in plugins $CNI_PLUGINS_VERSION"; exit 1
}

build_cni() {
  # The stamp holds the plugin list: a changed CNI_PLUGINS rebuilds.
  local bin="$cni_root/bin" stamp="$cni_root/.complete"
  # shellcheck disable=SC2312 # a stamp that cannot be read compares unequal: rebuilt, the safe answer
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$CNI_PLUGINS" ]]; then
    log "cni plugins $CNI_PLUGINS_VERSION: cached in $bin"; echo "$bin"; return
  fi
  local t0=$SECONDS p pkgs=()
  (cd "$tools_root" && go mod download github.com/containernetworking/plugins@"$CNI_PLUGINS_VERSION")
  for p in $CNI_PLUGINS; do pkgs+=("$(cni_pkg "$p")@$CNI_PLUGINS_VERSION"); done
  log "cni plugins $CNI_PLUGINS_VERSION: go install ${CNI_PLUGINS// /,}"
  # As the plugins' release script sets it: `CNI_COMMAND=VERSION` and `--version` report the tag.
  install_to "$bin" "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "${pkgs[@]}"
  for p in $CNI_PLUGINS; do [[ -x "$bin/$p" ]] || { log "missing $bin/$p"; exit 1; }; done
  echo "$CNI_PLUGINS" > "$stamp"
  log "cni plugins $CNI_PLUGINS_VERSION: built in $((SECONDS - t0))s"
  echo "$bin"
}

build_crictl() {
  local stamp="$crictl_root/.complete"
  if [[ -f "$stamp" ]]; then log "crictl $CRICTL_VERSION: cached in $crictl_root"; echo "$crictl_root/crictl"; return; fi
  local t0=$SECONDS
  log "crictl $CRICTL_VERSION: go install"
  # As cri-tools' hack/release.sh: Version is the tag, with its v.
  install_to "$crictl_root" "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    sigs.k8s.io/cri-tools/cmd/crictl@"$CRICTL_VERSION"
  "$crictl_root/crictl" --version >&2
  touch "$stamp"
  log "crictl $CRICTL_VERSION: built in $((SECONDS - t0))s"
  echo "$crictl_root/crictl"
}

build_coredns() {
  local stamp="$coredns_root/.complete"
  if [[ -f "$stamp" ]]; then log "coredns $COREDNS_VERSION: cached in $coredns_root"; echo "$coredns_root/coredns"; return; fi
  local t0=$SECONDS sum c=github.com/coredns/coredns/coremain
  sum="$(module_sum github.com/coredns/coredns "$COREDNS_VERSION")"
  log "coredns $COREDNS_VERSION: go build with the plugins $COREDNS_PLUGINS"
  # A main package of our own, as upstream's coredns.go but importing only those plugins (the
  # directive order stays upstream's, core/dnsserver/zdirectives.go); its module requires
  # coredns at the tag, so every dependency resolves to the version upstream's go.mod names.
  local mod="$coredns_root.src" p
  rm -rf "$mod"; mkdir -p "$mod" "$coredns_root"
  {
    echo 'package main'
    echo 'import ('
    echo '	"github.com/coredns/coredns/coremain"'
    for p in $COREDNS_PLUGINS; do echo "	_ \"github.com/coredns/coredns/plugin/$p\""; done
    echo ')'
    echo 'func main() { coremain.Run() }'
  } > "$mod/main.go"
  (cd "$mod" && go mod init koo-testbed/coredns >/dev/null 2>&1 &&
    go mod edit -require=github.com/coredns/coredns@"$COREDNS_VERSION" && go mod tidy &&
    # CoreDNS' Makefile sets GitCommit; gitTag makes -version print the release, not "(untracked dev build)".
    go build -trimpath -ldflags "-s -w -X '$c.GitCommit=$sum' -X '$c.gitTag=$COREDNS_VERSION'" \
      -o "$coredns_root/coredns" .)
  "$coredns_root/coredns" -version >&2
  local listed
  listed="$("$coredns_root/coredns" -plugins)"
  for p in $COREDNS_PLUGINS; do
    [[ "$p" == metrics ]] && p=prometheus
    grep -qx "$p" <<< "$listed" || { log "coredns: plugin $p missing from the build:"$'\n'"$listed"; exit 1; }
  done
  touch "$stamp"
  log "coredns $COREDNS_VERSION: built in $((SECONDS - t0))s"
  echo "$coredns_root/coredns"
}

paths() {
  echo "cni_bin_dir=$cni_root/bin"
  echo "crictl=$crictl_root/crictl"
  echo "coredns=$coredns_root/coredns"
}

parts=("$@"); [[ ${#parts[@]} -gt 0 ]] || parts=(all)
if [[ "${parts[*]}" == paths ]]; then paths; exit 0; fi
mkdir -p "$tools_root"
# One build at a time (up.sh and images.sh both call this script): a second caller waits, then
# finds the stamps.
exec 9>"$tools_root/.lock"
flock 9
start=$SECONDS
for p in "${parts[@]}"; do
  case "$p" in
    cni) build_cni ;; crictl) build_crictl ;; coredns) build_coredns ;;
    all) build_cni; build_crictl; build_coredns ;;
    *) log "unknown part '$p' (expected cni, crictl, coredns, all or paths)"; exit 2 ;;
  esac
done
log "done in $((SECONDS - start))s: $tools_root"
