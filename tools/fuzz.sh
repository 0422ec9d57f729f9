#!/usr/bin/env bash
# Runs every fuzz target of the module, one after another, for FUZZTIME
# each (default 60s). A failing input is written to the target's
# testdata/fuzz directory, where 'make test' runs it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}

targets=$("$GO" test -list '^Fuzz' ./... |
	awk '/^Fuzz/ { fns = fns " " $1 } /^ok / { if (fns != "") print $2 fns; fns = "" }')
n=0
while read -r pkg fns; do
	for fn in $fns; do
		n=$((n + 1))
		echo "== $pkg $fn ($FUZZTIME)"
		"$GO" test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg"
	done
done <<<"$targets"
echo "fuzz: $n targets, $FUZZTIME each, no failure"
