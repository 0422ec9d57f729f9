# mcpx — build, demo, test, bench.
GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/mcpx-dev/mcpx/commands.Version=$(VERSION)
PEERS    := tools/peers

.PHONY: all build demo test unit e2e vet lint peers conformance bench fuzz soak completions check-completions clean fleet-drill

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mcpx ./cmd/mcpx
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mcpx-fixtures ./cmd/mcpx-fixtures

# The whole job end to end on embedded defaults, in a temporary socket and
# state dir: a fixture upstream, tools, calls, probes of a healthy and a
# broken TLS endpoint, a headless-browser sign-in, both drills, activity.
demo: build
	$(GO) build -trimpath -o $(BIN)/mcpx-browser ./tools/conformance/mcpx-client
	bash tools/demo.sh

# Every test: vet, staticcheck, unit and integration tests under -race,
# the end-to-end suite against the real binaries, third-party peers and the
# conformance suite (installed from the npm registry by 'make peers').
test: vet lint peers check-completions
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 MCPX_REQUIRE_POSTGRES=1 MCPX_REQUIRE_SHELLS=1 $(GO) test -race -count=1 -timeout 20m ./...
	# The refresh race, repeated: exactly one token request every time.
	$(GO) test -race -count=20 -run 'TestConcurrentCallersOneRefresh|TestProactiveAfterReactiveDoesNotRefreshAgain' ./proxyd/oauth/

unit:
	$(GO) test -race -count=1 ./proxyd/... ./probe/... ./commands/... ./fixtures/...

e2e: peers
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 $(GO) test -race -count=1 -timeout 20m ./e2e/...

vet:
	$(GO) vet ./...

# staticcheck with its default checks, unused code included; deliberate
# uses of deprecated mcp-go API (the legacy protocol era) carry a
# //lint:ignore with the reason.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...

peers:
	bash $(PEERS)/install.sh

conformance: peers
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 $(GO) test -race -count=1 -run 'Conformance' -v ./e2e/...

# Every fuzz target (the parsers of outside input) for FUZZTIME each, one
# at a time. The corpus (testdata/fuzz and each target's seeds) also runs
# in 'make test', as ordinary tests.
FUZZTIME ?= 60s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash tools/fuzz.sh

# The hostile soak for longer than 'make test' runs it (two 5 s phases):
# misbehaving upstreams, hostile clients, a SIGKILL and a restart after
# every phase; the pass criteria are printed as figures.
SOAK_PHASES ?= 6
SOAK_PHASE  ?= 60s
soak:
	MCPX_SOAK_PHASES=$(SOAK_PHASES) MCPX_SOAK_PHASE=$(SOAK_PHASE) $(GO) test -count=1 -v -timeout 60m -run '^TestHostileSoak$$' ./e2e/

# The refresh drill across replicas at full length: 20 cycles and 5 holder
# kills on three replicas sharing PostgreSQL and two sharing SQLite
# ('make test' runs 3 cycles and 2 kills).
fleet-drill: peers
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 MCPX_REQUIRE_POSTGRES=1 MCPX_FLEET_LONG=1 $(GO) test -race -count=1 -timeout 20m -run 'TestFleetRefreshDrill' -v ./e2e/

# Each benchmark measures against a baseline taken in the same run and
# prints the ratio; see README "Performance".
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./bench/
	$(GO) test -run '^$$' -bench 'Ingest|FilteredQuery|RecordingOverhead' ./proxyd/activity/
	$(GO) test -run '^$$' -bench ProbeVsMinimal -benchtime 20x ./probe/
	$(GO) test -run '^$$' -bench ExpiredTokenThousandCallers -benchtime 20x ./proxyd/oauth/
	$(GO) test -run '^$$' -bench ForgottenSession100 -benchtime 100x ./proxyd/upstream/
	$(GO) test -run '^$$' -bench CallOverhead -benchtime 5000x ./proxyd/telemetry/
	$(GO) test -run '^$$' -bench CallLatencyByState -benchtime 2000x ./proxyd/
	$(GO) test -run '^$$' -bench CallManyTools -benchtime 2000x ./proxyd/
	$(GO) test -run '^$$' -bench SyncManyTools -benchtime 30x ./proxyd/downstream/
	$(GO) test -run '^$$' -bench RefreshStormReplicas -benchtime 10x ./proxyd/oauth/

completions: build
	$(BIN)/mcpx completion bash > completions/mcpx.bash
	$(BIN)/mcpx completion zsh > completions/_mcpx
	$(BIN)/mcpx completion fish > completions/mcpx.fish

check-completions:
	$(GO) test -count=1 -run TestCompletionsUpToDate ./commands/

clean:
	rm -rf $(BIN)
