#!/usr/bin/env bash
# make demo: the main job end to end on a throwaway state dir. Starts the
# fixture MCP server, points proxyd at it, lists tools, calls one, shows a
# classified failure and the activity log, then stops everything.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mcpx="$root/bin/mcpx"
fixtures="$root/bin/mcpx-fixtures"
for b in "$mcpx" "$fixtures"; do
	if [[ ! -x "$b" ]]; then
		echo "demo: $b is missing; run 'make build' (or 'make demo')" >&2
		exit 1
	fi
done

tmp="$(mktemp -d /tmp/mcpx-demo-XXXXXX)"
fixture_pid=""
cleanup() {
	local rc=$?
	# Stop proxyd if a step failed before 'mcpx down'; never mind errors here.
	"$mcpx" down >/dev/null 2>&1 || true
	if [[ -n "$fixture_pid" ]]; then
		kill "$fixture_pid" 2>/dev/null || true
		wait "$fixture_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	if [[ $rc -ne 0 ]]; then
		echo >&2
		echo "demo FAILED (exit $rc)" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Everything lives in the temp dir: your own proxyd and config are untouched.
export MCPX_SOCKET="$tmp/proxyd.sock"
export MCPX_CONFIG="$tmp/config.yaml"
export MCPX_STATE_DIR="$tmp/state"

section() { printf '\n== %s ==\n' "$*"; }
# show prints a mcpx command line the way a user would type it, then runs it.
show() { printf '$ mcpx %s\n' "$*"; "$mcpx" "$@"; }

section "fixture MCP server"
"$fixtures" mcp --addr 127.0.0.1:0 >"$tmp/fixture.out" 2>"$tmp/fixture.err" &
fixture_pid=$!
url=""
for _ in $(seq 1 100); do # up to 10 s for the ready line
	url="$(sed -n 's/^url: //p' "$tmp/fixture.out")"
	[[ -n "$url" ]] && break
	if ! kill -0 "$fixture_pid" 2>/dev/null; then
		cat "$tmp/fixture.err" >&2
		echo "demo: the fixture server exited" >&2
		exit 1
	fi
	sleep 0.1
done
if [[ -z "$url" ]]; then
	echo "demo: the fixture server printed no url line within 10s" >&2
	exit 1
fi
echo "serving $url (pid $fixture_pid)"

section "config ($MCPX_CONFIG)"
cat >"$MCPX_CONFIG" <<YAML
# proxyd's downstream endpoint on a free loopback port, one upstream.
listen: 127.0.0.1:0
servers:
  - name: fixture
    url: $url
YAML
cat "$MCPX_CONFIG"

section "start proxyd"
show up

# Wait (bounded) until the upstream is connected, so the listing is complete.
for _ in $(seq 1 100); do
	if "$mcpx" status -o json | grep -q '"state": "ready"'; then
		break
	fi
	sleep 0.1
done

section "status"
show status

section "tools"
show tools

section "call a tool"
show call fixture echo text=hello

section "a failing call, classified (exit 4 expected)"
set +e
show call fixture fail
rc=$?
set -e
if [[ $rc -ne 4 ]]; then
	echo "demo: 'mcpx call fixture fail' exited $rc, want 4" >&2
	exit 1
fi
echo "(exit $rc)"

section "activity"
show activity

section "stop proxyd"
show down

kill "$fixture_pid" 2>/dev/null || true
wait "$fixture_pid" 2>/dev/null || true
fixture_pid=""

section "done"
echo "demo passed"
