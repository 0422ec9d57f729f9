# mcpx — build, demo, test, bench.
GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/mcpx-dev/mcpx/commands.Version=$(VERSION)
PEERS    := tools/peers

.PHONY: all build demo test unit e2e vet peers conformance bench completions check-completions clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mcpx ./cmd/mcpx
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mcpx-fixtures ./cmd/mcpx-fixtures

# The main job end to end on embedded defaults: a fixture upstream, proxyd
# on a temporary socket and state dir, tools, a call, status, stop.
demo: build
	bash tools/demo.sh

# Every test: vet, unit and integration tests under -race, the end-to-end
# suite against the real binaries, third-party peers and the conformance
# suite (installed from the npm registry by 'make peers').
test: vet peers check-completions
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 MCPX_REQUIRE_POSTGRES=1 $(GO) test -race -count=1 -timeout 20m ./...
	# The refresh race, repeated: exactly one token request every time.
	$(GO) test -race -count=20 -run 'TestConcurrentCallersOneRefresh|TestProactiveAfterReactiveDoesNotRefreshAgain' ./proxyd/oauth/

unit:
	$(GO) test -race -count=1 ./proxyd/... ./probe/... ./commands/... ./fixtures/...

e2e: peers
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 $(GO) test -race -count=1 -timeout 20m ./e2e/...

vet:
	$(GO) vet ./...

peers:
	bash $(PEERS)/install.sh

conformance: peers
	MCPX_PEERS_DIR=$(CURDIR)/$(PEERS) MCPX_REQUIRE_PEERS=1 $(GO) test -race -count=1 -run 'Conformance' -v ./e2e/...

# Each benchmark measures against a baseline taken in the same run and
# prints the ratio; see README "Performance".
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./bench/
	$(GO) test -run '^$$' -bench 'Ingest|FilteredQuery|RecordingOverhead' ./proxyd/activity/
	$(GO) test -run '^$$' -bench ProbeVsMinimal -benchtime 20x ./probe/
	$(GO) test -run '^$$' -bench ExpiredTokenThousandCallers -benchtime 20x ./proxyd/oauth/
	$(GO) test -run '^$$' -bench ForgottenSession100 -benchtime 100x ./proxyd/upstream/
	$(GO) test -run '^$$' -bench CallOverhead -benchtime 5000x ./proxyd/telemetry/

completions: build
	$(BIN)/mcpx completion bash > completions/mcpx.bash
	$(BIN)/mcpx completion zsh > completions/_mcpx
	$(BIN)/mcpx completion fish > completions/mcpx.fish

check-completions:
	$(GO) test -count=1 -run TestCompletionsUpToDate ./commands/

clean:
	rm -rf $(BIN)
