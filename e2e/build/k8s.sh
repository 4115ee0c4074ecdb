#!/usr/bin/env bash
# Build the pinned Kubernetes control plane (kube-apiserver, kube-controller-manager, kubectl),
# the node (kubelet, kube-scheduler, kube-proxy), etcd and helm from the Go module proxy into $KOO_CACHE. Idempotent: each finished part leaves
# a stamp and is skipped next time. Usage: e2e/build/k8s.sh [k8s|etcd|helm ...] (default: all).
#
# k8s.io/kubernetes replaces its staging modules with ./staging/src paths, which a dependent
# module cannot use, so a generated wrapper module requires k8s.io/kubernetes and points each
# staging module at its published v0.X.Y twin. The wrappers live in the cache, not the tree.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
log_tag="k8s.sh" log_time="%T"

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"
k8s_root="$KOO_CACHE/k8s/$K8S_VERSION"
helm_root="$KOO_CACHE/helm/$HELM_VERSION"

# Prints the go.sum-style hash of a module zip: the honest "commit" of a proxy-built binary,
# since the proxy does not tell us the git commit of a tag.
module_sum() {
  go mod download -json "$1@$2" | sed -n 's/^\t"Sum": "\(.*\)",$/\1/p'
}

# Prints the release time of a module version (RFC 3339), used as buildDate so the
# binaries do not depend on when they were built.
module_time() {
  go mod download -json "$1@$2" >/dev/null
  # shellcheck disable=SC2312 # go env prints a path; a wrong one makes sed fail on the missing file
  sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(go env GOMODCACHE)/cache/download/$1/@v/$2.info"
}

# write_wrapper DIR MODULE VERSION PKG... : a module that only exists to build PKG... of MODULE.
write_wrapper() {
  local dir="$1" module="$2" version="$3"; shift 3
  mkdir -p "$dir"
  {
    echo "module koo.local/build-$(basename "$dir")"
    echo
    echo "go 1.24.0"
    echo
    echo "require $module $version"
  } > "$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "// Package tools pins the commands this wrapper module builds."
    echo "package tools"
    echo
    echo "import ("
    for p in "$@"; do echo "	_ \"$p\""; done
    echo ")"
  } > "$dir/tools.go"
}

build_k8s() {
  # The stamp names the command set: a cache built before the node commands were added rebuilds.
  local bin="$k8s_root/bin" stamp="$k8s_root/bin/.k8s-node-complete"
  if [[ -f "$stamp" ]]; then log "kubernetes $K8S_VERSION: cached in $bin"; return; fi
  local t0=$SECONDS src="$k8s_root/wrapper-k8s"
  local cmds=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
              k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet
              k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)
  log "kubernetes $K8S_VERSION: preparing wrapper module in $src"
  rm -rf "$src"
  write_wrapper "$src" k8s.io/kubernetes "$K8S_VERSION" "${cmds[@]}"
  go mod download k8s.io/kubernetes@"$K8S_VERSION"
  local kmod staging v0="v0.${K8S_VERSION#v1.}"
  kmod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod"
  # Kubernetes' own go.mod lists its staging modules as `k8s.io/x => ./staging/src/k8s.io/x`.
  staging="$(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' "$kmod")"
  [[ -n "$staging" ]] || { log "no staging replaces found in $kmod"; exit 1; }
  {
    echo
    echo "// Kubernetes' default GODEBUG settings, as its own go.mod declares them."
    grep '^godebug ' "$kmod" || true
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $v0"; done
    echo ")"
  } >> "$src/go.mod"
  (cd "$src" && go mod tidy)

  local major minor sum date ld=()
  major="${K8S_VERSION#v}"; major="${major%%.*}"
  minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
  sum="$(cd "$src" && module_sum k8s.io/kubernetes "$K8S_VERSION")"
  date="$(cd "$src" && module_time k8s.io/kubernetes "$K8S_VERSION")"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=("-X '$pkg.gitVersion=$K8S_VERSION'" "-X '$pkg.gitMajor=$major'" "-X '$pkg.gitMinor=$minor'"
         "-X '$pkg.gitCommit=$sum'" "-X '$pkg.gitTreeState=archive'" "-X '$pkg.buildDate=$date'")
  done
  log "kubernetes $K8S_VERSION: go build (${#cmds[@]} commands, one invocation)"
  rm -rf "$bin.tmp"; mkdir -p "$bin.tmp"
  (cd "$src" && go build -trimpath -ldflags "-s -w ${ld[*]}" -o "$bin.tmp/" "${cmds[@]}")
  mkdir -p "$bin"
  mv -f "$bin.tmp"/* "$bin/"; rmdir "$bin.tmp"
  "$bin/kubectl" version --client >&2
  touch "$stamp"
  log "kubernetes $K8S_VERSION: built in $((SECONDS - t0))s"
}

build_etcd() {
  local bin="$k8s_root/bin" stamp="$k8s_root/bin/.etcd-$ETCD_VERSION-complete"
  if [[ -f "$stamp" ]]; then log "etcd $ETCD_VERSION: cached in $bin"; return; fi
  local t0=$SECONDS src="$k8s_root/wrapper-etcd" sum
  log "etcd $ETCD_VERSION: preparing wrapper module in $src"
  rm -rf "$src"
  write_wrapper "$src" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3
  (cd "$src" && go mod tidy)
  sum="$(cd "$src" && module_sum go.etcd.io/etcd/server/v3 "$ETCD_VERSION")"
  log "etcd $ETCD_VERSION: go build"
  mkdir -p "$bin"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X 'go.etcd.io/etcd/api/v3/version.GitSHA=$sum'" \
    -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv -f "$bin/etcd.tmp" "$bin/etcd"
  "$bin/etcd" --version >&2
  touch "$stamp"
  log "etcd $ETCD_VERSION: built in $((SECONDS - t0))s"
}

build_helm() {
  local bin="$helm_root/bin" stamp="$helm_root/bin/.complete"
  if [[ -f "$stamp" ]]; then log "helm $HELM_VERSION: cached in $bin"; return; fi
  local t0=$SECONDS src="$helm_root/wrapper-helm" sum kver kmaj kmin
  log "helm $HELM_VERSION: preparing wrapper module in $src"
  rm -rf "$src"
  write_wrapper "$src" helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
  (cd "$src" && go mod tidy)
  sum="$(cd "$src" && module_sum helm.sh/helm/v3 "$HELM_VERSION")"
  # helm reports the Kubernetes version it was built against, as its Makefile sets it.
  kver="$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/client-go)"
  kmaj=1; kmin="${kver#v0.}"; kmin="${kmin%%.*}"
  local v=helm.sh/helm/v3/internal/version
  log "helm $HELM_VERSION: go build"
  mkdir -p "$bin"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X '$v.version=$HELM_VERSION' -X '$v.gitCommit=$sum' \
    -X '$v.gitTreeState=clean' -X '$v.metadata=' \
    -X 'helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$kmaj' \
    -X 'helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kmin' \
    -X 'helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$kmaj' \
    -X 'helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kmin'" \
    -o "$bin/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv -f "$bin/helm.tmp" "$bin/helm"
  "$bin/helm" version >&2
  touch "$stamp"
  log "helm $HELM_VERSION: built in $((SECONDS - t0))s"
}

parts=("$@"); [[ ${#parts[@]} -gt 0 ]] || parts=(k8s etcd helm)
# One build at a time (make test builds these beside the cargo stages, e2e/build/beside.sh, while
# alerts-check may ask for helm): a second caller waits, then finds the stamps.
mkdir -p "$KOO_CACHE/k8s"
exec 9>"$KOO_CACHE/k8s/.lock"
flock 9
start=$SECONDS
for p in "${parts[@]}"; do
  case "$p" in
    k8s) build_k8s ;; etcd) build_etcd ;; helm) build_helm ;;
    *) log "unknown part '$p' (expected k8s, etcd or helm)"; exit 2 ;;
  esac
done
log "done in $((SECONDS - start))s: $k8s_root/bin, $helm_root/bin"
