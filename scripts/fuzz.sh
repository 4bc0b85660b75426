#!/usr/bin/env bash
# Runs every Fuzz target of the module for the given time each, one after the
# other (go test -fuzz takes one target per run), and prints exec counts.
# A crasher found by the engine fails the run (its input is written under
# testdata/fuzz/); a failure of the engine itself without a crasher (Go's
# "context deadline exceeded" when the time runs out while it handles a new
# input, or a worker starved on a loaded machine) is shown in full and
# retried up to twice.
set -uo pipefail
fuzztime=${1:-3s}
cd "$(dirname "$0")/.."
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for t in $targets; do
    for try in 1 2 3; do
      echo "== fuzz $pkg $t ($fuzztime)"
      if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "$pkg" >"$out" 2>&1; then
        grep -E 'execs:' "$out" | tail -1
        break
      fi
      cat "$out"
      if grep -q 'Failing input written' "$out" || [ "$try" = 3 ]; then
        status=1
        break
      fi
      echo "== engine failure without a crasher; retrying $t"
    done
  done
done
exit $status
