#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each.
# Usage: hack/fuzz.sh [FUZZTIME]   (default 10s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-10s}

count=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
    count=$((count + 1))
  done
done
echo "fuzz: $count targets ran for $fuzztime each"
