#!/usr/bin/env bash
# Runs every Fuzz target of the module for the given time each, one after the
# other (go test -fuzz takes one target per run). Prints exec counts.
set -euo pipefail
fuzztime=${1:-3s}
cd "$(dirname "$0")/.."
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for t in $targets; do
    echo "== fuzz $pkg $t ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "$pkg" 2>&1 | tail -3; then
      status=1
    fi
  done
done
exit $status
