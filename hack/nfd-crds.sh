#!/usr/bin/env bash
# Generates Node Feature Discovery's CRDs (NodeFeature, NodeFeatureRule,
# NodeFeatureGroup) into config/crd/nfd/ with the project's controller-gen,
# from NFD's published API module at NFD_VERSION. nfd-worker and nfd-master
# need them; the chart and the bundle ship them with ours.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/hack/versions.env"
cache=${GPU_OPERATOR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-operator/tools}
src=$cache/nfd-api-$NFD_VERSION
out=$root/config/crd/nfd

if [[ ! -f $src/go.sum ]]; then
  mkdir -p "$src"
  cat >"$src/go.mod" <<MOD
module gpu-operator.local/nfdcrds

go 1.26

require sigs.k8s.io/node-feature-discovery/api/nfd $NFD_VERSION
MOD
  printf 'package tools\n\nimport _ "sigs.k8s.io/node-feature-discovery/api/nfd/v1alpha1"\n' >"$src/tools.go"
  (cd "$src" && GOFLAGS=-mod=mod go mod tidy)
fi
rm -rf "$out" && mkdir -p "$out"
(cd "$src" && "$root/bin/controller-gen" crd paths=sigs.k8s.io/node-feature-discovery/api/nfd/v1alpha1 output:crd:dir="$out")
