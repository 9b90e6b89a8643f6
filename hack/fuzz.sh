#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each.
# Usage: hack/fuzz.sh [FUZZTIME]   (default 10s)
#
# Go before 1.27 may fail a target with a bare "context deadline exceeded"
# as -fuzztime runs out, while a worker is still busy: a race in its fuzz
# coordinator (golang/go#75804, fixed in Go 1.27), not a finding. A real
# finding writes its input under testdata/fuzz and says "Failing input
# written to". Such a bare failure is run once more; a second one fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-10s}

# fuzz runs one target, its output shown and kept in $log.
fuzz() {
  go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" "$1" 2>&1 | tee "$log"
}

# deadlineRace reports whether a failed run's output is the coordinator's
# race alone: the deadline, and no input written.
deadlineRace() {
  grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
count=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $fuzztime"
    if ! fuzz "$pkg" "$target"; then
      if ! deadlineRace; then
        exit 1
      fi
      echo "fuzz: $target stopped on the deadline with no failing input (golang/go#75804): once more"
      fuzz "$pkg" "$target"
    fi
    count=$((count + 1))
  done
done
echo "fuzz: $count targets ran for $fuzztime each"
