#!/usr/bin/env bash
# Builds the test toolchain from source through the Go module proxy and links
# it into bin/. Release pages and object stores are unreachable here, so
# setup-envtest cannot be used; every binary is compiled from its Go module.
#
# Usage: hack/tools.sh [TOOL...]   TOOL: kube etcd controller-gen kwok helm monitoring
#                                  (default: kube etcd controller-gen)
#
# Builds land in $GPU_OPERATOR_TOOLS_CACHE (default ~/.cache/gpu-operator/tools),
# outside the clone, keyed by version, so a fresh clone on the same machine
# reuses them. A build that already finished is never repeated.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
source "$root/hack/versions.env"
cache=${GPU_OPERATOR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-operator/tools}
bindir=$root/bin
mkdir -p "$cache" "$bindir"

log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# timed NAME CMD...: runs CMD and prints how long it took.
timed() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  log "$name built in $((SECONDS - start))s"
}

# link DIR BIN...: symlinks cached binaries into bin/.
link() {
  local dir=$1
  shift
  for b in "$@"; do ln -sfn "$dir/$b" "$bindir/$b"; done
}

# done_in DIR: true when a previous build in DIR completed.
done_in() { [[ -f "$1/.complete" ]]; }

build_kube() {
  local dir=$cache/kubernetes-$KUBERNETES_VERSION
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if ! done_in "$dir"; then
    log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $KUBERNETES_VERSION (about 6 min on 2 cores with a cold cache)"
    timed kubernetes _build_kube "$dir"
  fi
  link "$dir" "${bins[@]}"
}

_build_kube() {
  local dir=$1 src=$1/src
  rm -rf "$dir" && mkdir -p "$src"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
  # with ./staging paths, so it cannot be installed directly. A wrapper module
  # points each staging module at its published version instead.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  {
    echo "module gpu-operator.local/kubetools"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$KUBERNETES_STAGING_VERSION"'#p' "$gomod"
  } >"$src/go.mod"
  cat >"$src/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  local minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  (
    cd "$src"
    GOFLAGS=-mod=mod go mod tidy
    # One build for all four: they share most of their packages.
    CGO_ENABLED=0 go build -tags tools -ldflags "$ld" -o "$dir/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  )
  touch "$dir/.complete"
}

build_etcd() {
  local dir=$cache/etcd-$ETCD_VERSION
  if ! done_in "$dir"; then
    log "building etcd $ETCD_VERSION (about 1.5 min)"
    timed etcd _build_etcd "$dir"
  fi
  link "$dir" etcd
}

_build_etcd() {
  local dir=$1 src=$1/src
  rm -rf "$dir" && mkdir -p "$src"
  # etcd's server module has ../ replaces, so it needs a wrapper main too.
  cat >"$src/go.mod" <<MOD
module gpu-operator.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat >"$src/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$src"
    GOFLAGS=-mod=mod go mod tidy
    CGO_ENABLED=0 go build -ldflags "-s -w" -o "$dir/etcd" .
  )
  touch "$dir/.complete"
}

# go_install NAME VERSION PACKAGE [LDFLAGS]
go_install() {
  local name=$1 version=$2 pkg=$3 ld=${4:-}
  local dir=$cache/$name-$version
  if ! done_in "$dir"; then
    log "building $name $version"
    timed "$name" _go_install "$dir" "$pkg@$version" "$ld"
  fi
  link "$dir" "$name"
}

_go_install() {
  local dir=$1 pkg=$2 ld=$3
  rm -rf "$dir" && mkdir -p "$dir"
  CGO_ENABLED=0 GOBIN=$dir GOFLAGS=-mod=mod go install -ldflags "-s -w $ld" "$pkg"
  touch "$dir/.complete"
}

build_helm() {
  local minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  # Without these helm reports v3.22 and templates for Kubernetes 1.20.
  local ld="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" pkg
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  go_install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "$ld"
}

# build_monitoring builds promtool and promnames from hack/monitoring, a
# module of its own that pins Prometheus's version (its go.mod), keyed by a
# digest of that module's files so that an edit rebuilds them.
build_monitoring() {
  local mod=$root/hack/monitoring key
  key=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*.go | sha256sum | cut -c1-16)
  local dir=$cache/monitoring-$key
  if ! done_in "$dir"; then
    log "building promtool and promnames from hack/monitoring (about 5 min on 2 cores with a cold cache)"
    timed monitoring _build_monitoring "$dir" "$mod"
  fi
  link "$dir" promtool promnames
}

_build_monitoring() {
  local dir=$1 mod=$2
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$mod" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$dir/promtool" github.com/prometheus/prometheus/cmd/promtool &&
    CGO_ENABLED=0 go build -ldflags "-s -w" -o "$dir/promnames" .)
  touch "$dir/.complete"
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(kube etcd controller-gen)
start=$SECONDS
for t in "${tools[@]}"; do
  case $t in
  kube) build_kube ;;
  etcd) build_etcd ;;
  controller-gen) go_install controller-gen "$CONTROLLER_TOOLS_VERSION" sigs.k8s.io/controller-tools/cmd/controller-gen ;;
  kwok) go_install kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok ;;
  helm) build_helm ;;
  monitoring) build_monitoring ;;
  *)
    echo "hack/tools.sh: unknown tool '$t' (known: kube etcd controller-gen kwok helm monitoring)" >&2
    exit 2
    ;;
  esac
done
log "toolchain ready in bin/ ($((SECONDS - start))s): ${tools[*]}"
