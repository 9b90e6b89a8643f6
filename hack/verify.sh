#!/usr/bin/env bash
# Fails when generated files are stale, the code is not formatted, vetted
# and tidy, the operator does not build for arm64, or a build output (a
# binary, a file over 1 MB) is tracked. Run
# through `make verify`, which regenerates first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail=0
problem() { echo "verify: $*" >&2; fail=1; }

generated=(api config internal/crds deployments/gpu-operator bundle bundle.Dockerfile)
if ! git diff --quiet -- "${generated[@]}"; then
  problem "generated files are stale; run 'make manifests generate' and commit:"
  git diff --stat -- "${generated[@]}" >&2
fi
untracked=$(git ls-files --others --exclude-standard -- "${generated[@]}")
[[ -z $untracked ]] || problem "generated files are not committed:"$'\n'"$untracked"

unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
[[ -z $unformatted ]] || problem "gofmt would change:"$'\n'"$unformatted"

go vet ./... || problem "go vet failed"
go vet -tags e2e ./test/e2e/... || problem "go vet (e2e) failed"
go vet -tags chaos ./test/chaos/... || problem "go vet (chaos) failed"
go mod tidy -diff >/dev/null || problem "go.mod/go.sum are not tidy; run 'go mod tidy'"

# The image's second platform builds the Dockerfile's way with GOARCH set
# (Go cross-compiles; nothing is emulated). A build check, as go vet is:
# it compiles every dependency once more for arm64, about two minutes on
# 2 cores with a cold cache, which make test does not need to pay.
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -o /dev/null ./cmd/gpu-operator ||
  problem "the operator does not build for linux/arm64, the image's second platform"

# Every package says what it owns in a doc.go.
for dir in $(go list -f '{{.Dir}}' ./...); do
  [[ -f $dir/doc.go ]] || problem "${dir#"$PWD"/} has no doc.go"
done

# No build output is tracked: no executable binary, no file over 1 MB.
while IFS= read -r f; do
  [[ -f $f ]] || continue
  if (($(stat -c %s "$f") > 1048576)); then
    problem "$f is over 1 MB: build outputs and large data do not belong in the repository"
  elif head -c 4 "$f" | grep -q $'^\x7fELF'; then
    problem "$f is a binary: build into bin/ or _output/"
  fi
done < <(git ls-files)

[[ $fail -eq 0 ]] && echo "verify: ok"
exit $fail
