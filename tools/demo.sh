#!/usr/bin/env bash
# make demo: the whole job end to end on a throwaway state dir: the fixture
# MCP server behind proxyd (tools, a call, a classified failure), a probe
# of a healthy and a broken TLS endpoint, a sign-in to the fixture
# authorization server with a headless browser, both drills, and the
# activity log's upstream failures; then everything stops.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# MCPX_DEMO_BINDIR runs the demo on binaries built elsewhere (the e2e test).
bindir="${MCPX_DEMO_BINDIR:-$root/bin}"
mcpx="$bindir/mcpx"
fixtures="$bindir/mcpx-fixtures"
browser="$bindir/mcpx-browser"
for b in "$mcpx" "$fixtures" "$browser"; do
	if [[ ! -x "$b" ]]; then
		echo "demo: $b is missing; run 'make build' (or 'make demo')" >&2
		exit 1
	fi
done

tmp="$(mktemp -d /tmp/mcpx-demo-XXXXXX)"
pids=()
cleanup() {
	local rc=$?
	# Stop proxyd if a step failed before 'mcpx down'; never mind errors here.
	"$mcpx" down >/dev/null 2>&1 || true
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
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
# expect runs a mcpx command that must exit with the given code.
expect() {
	local want=$1 rc
	shift
	set +e
	show "$@"
	rc=$?
	set -e
	if [[ $rc -ne $want ]]; then
		echo "demo: 'mcpx $*' exited $rc, want $want" >&2
		exit 1
	fi
	echo "(exit $rc, as documented)"
}

# fixture NAME ARGS... starts 'mcpx-fixtures ARGS' and waits (up to 10 s)
# for its ready lines in $tmp/NAME.out; value NAME KEY reads one.
fixture() {
	local name=$1
	shift
	"$fixtures" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=($!)
	for _ in $(seq 1 100); do
		[[ -n "$(value "$name" url)" ]] && return 0
		if ! kill -0 "${pids[-1]}" 2>/dev/null; then
			cat "$tmp/$name.err" >&2
			echo "demo: mcpx-fixtures $* exited" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "demo: mcpx-fixtures $* printed no url line within 10s" >&2
	exit 1
}
value() { sed -n "s/^$2: //p" "$tmp/$1.out" | head -1; }
# ready waits (up to 10 s) until proxyd reports the server ready.
ready() {
	for _ in $(seq 1 100); do
		if "$mcpx" status "$1" -o json 2>/dev/null | grep -q '"state": "ready"'; then
			return 0
		fi
		sleep 0.1
	done
	echo "demo: server $1 did not become ready" >&2
	"$mcpx" status "$1" >&2 || true
	exit 1
}

section "fixture MCP server"
fixture mcp mcp --addr 127.0.0.1:0 --era legacy
url="$(value mcp url)"
echo "serving $url (pid ${pids[-1]})"

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
ready fixture

section "status"
show status

section "tools"
show tools

section "call a tool"
show call fixture echo text=hello

section "a failing call, classified"
expect 4 call fixture fail

section "probe a healthy and a broken TLS endpoint"
fixture tls-ok tls --kind ok
fixture tls-expired tls --kind expired
show probe "$(value tls-ok url)" --ca-file "$(value tls-ok ca_file)" --waterfall=false
expect 15 probe "$(value tls-expired url)" --ca-file "$(value tls-expired ca_file)" --waterfall=false

section "sign in to a protected server (a headless browser approves)"
fixture auth authserver --mcp --era legacy
show servers add secure "$(value auth mcp)"
# The browser is a program that follows the sign-in's redirects, as a
# person who approves would: nothing opens on your screen.
BROWSER="$browser --browse" show login secure
ready secure
show call secure echo text=signed-in

section "drills"
show drill refresh secure --callers 20
show drill session fixture --calls 5

section "what failed, and whose fault"
show activity --fault-domain upstream

section "stop proxyd"
show down

section "done"
echo "demo passed"
