#!/usr/bin/env bash
# Runs the whole `go test ./...` GO_RUNS times and the e2e suite E2E_RUNS
# times while a CPU load keeps every core busy, and lists every failure:
# a test that reads asynchronous state without waiting for it, or a window
# too short, fails here first. The load is bounded: it stops with the hunt,
# and each busy loop after LOAD_LIMIT seconds at the latest.
#
#   hack/flake-hunt.sh            # GO_RUNS=3 E2E_RUNS=2
#   GO_RUNS=1 E2E_RUNS=0 hack/flake-hunt.sh
#
# Each run's output and a summary go to _output/flake-hunt/.
set -uo pipefail

GO_RUNS=${GO_RUNS:-3}
E2E_RUNS=${E2E_RUNS:-2}
LOAD_LIMIT=${LOAD_LIMIT:-7200}
TEST_PARALLEL=${TEST_PARALLEL:-8}
E2E_PROCS=${E2E_PROCS:-4}
# The e2e specs run in parallel processes through the Ginkgo CLI, at
# go.mod's version (make flake-hunt builds it too).
[[ -x bin/ginkgo ]] || go build -o bin/ginkgo github.com/onsi/ginkgo/v2/ginkgo || exit 2
out=_output/flake-hunt
mkdir -p "$out"
rm -f "$out"/*.log
summary="$out/summary.txt"
: >"$summary"

load=()
stop_load() {
	for pid in "${load[@]}"; do
		kill "$pid" 2>/dev/null
	done
}
trap stop_load EXIT INT TERM
for _ in $(seq "$(nproc)"); do
	timeout "$LOAD_LIMIT" sh -c 'while :; do :; done' &
	load+=($!)
done

# run NAME COMMAND...: runs one suite, records its exit code, wall time
# and failing tests.
run() {
	local name=$1 log="$out/$1.log" start rc
	shift
	start=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	{
		printf '%s: exit %d after %ds\n' "$name" "$rc" $(($(date +%s) - start))
		# go test's failures, and Ginkgo's, without their colours.
		sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\s*--- FAIL|^\s*\[FAIL\]|^FAIL\s' | sort -u | sed 's/^/  /'
	} | tee -a "$summary"
}

for i in $(seq "$GO_RUNS"); do
	run "go-test-$i" go test ./... -count=1 -timeout 20m -p "$TEST_PARALLEL"
done
for i in $(seq "$E2E_RUNS"); do
	run "e2e-$i" bin/ginkgo run --tags e2e --procs "$E2E_PROCS" --timeout 40m -v ./test/e2e
done
echo "summary: $summary"
! grep -q ': exit [^0]' "$summary"
