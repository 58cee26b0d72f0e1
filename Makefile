# jetagent — common tasks. `make demo` and `make test` are the two commands a
# newcomer needs (see README.md).

GO ?= go

.PHONY: all build setup test test-go fuzz conformance vet lint demo bench bench-go tokens clean

all: build

build:
	$(GO) build -o bin/ ./cmd/... ./examples/mcpserver

# setup installs what the tests need beyond Go modules: the npm reference MCP
# servers (conformance/run.sh installs its own pinned suite and Node 22).
setup:
	$(GO) mod download
	npm ci --prefix tools/npm --no-audit --no-fund --loglevel=error

vet:
	$(GO) vet ./...

# lint runs golangci-lint's default linters plus errorlint (.golangci.yml).
GOLANGCI_LINT ?= go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint:
	$(GOLANGCI_LINT) run ./...

# The second line runs, without the race detector, the tests that need
# what it takes away: a code-mode child under an address-space limit.
test-go:
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'TestProcessConversionOutOfMemory|TestWorkerSurvivesCodeOutOfMemory' ./internal/codemode ./cmd/worker

# fuzz runs each fuzzer for FUZZTIME from its committed seeds (f.Add and
# testdata/fuzz), one at a time: go test -fuzz takes one target per package
# run. A failing input is written to the package's testdata/fuzz/<Fuzzer>/;
# commit it with the fix. FUZZTIME is a count of executions, not a duration:
# Go 1.26's fuzz coordinator can report a spurious "context deadline
# exceeded" failure when a -fuzztime duration ends while a worker is mid-run
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race. It
# failed CI that way once. About 1.5 minutes on 2 cores.
FUZZTIME ?= 10000x
FUZZERS = \
	./internal/jobs:FuzzDecodeJob \
	./internal/agentrun:FuzzAdmit \
	./internal/agentloop:FuzzExtractContentCalls \
	./internal/agentloop:FuzzReadNearMiss \
	./internal/agentloop:FuzzValidateArguments \
	./internal/reflect:FuzzRewriteIdempotent \
	./internal/reflect:FuzzRewriteUntouched \
	./internal/reflect:FuzzRewriteOrder \
	./internal/journal:FuzzReplay
fuzz:
	@set -e; for f in $(FUZZERS); do \
		pkg=$${f%%:*}; name=$${f##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

conformance:
	bash conformance/run.sh

# The test command CI runs (.ci/run): vet, every Go test under the race
# detector, the fuzzers for a bounded time, then the MCP conformance suite.
test: setup vet test-go fuzz conformance

# demo runs one job end to end on the embedded NATS default: a worker with an
# embedded nats-server and the bundled example MCP server, a submitted task,
# its live events and the stored transcript. It uses OPENAI_BASE_URL /
# OPENAI_API_KEY / OPENAI_MODEL when set, and otherwise a scripted model that
# it names as such.
demo: build
	bin/demo

# bench measures this machine in one run and prints a table (cmd/bench:
# raw JetStream, the worker end to end, NATS operations per job, a slow
# model against Little's law, the toolcache call and search benchmarks);
# docs/BENCHMARKS.md "make bench" has a run. About 1-2 minutes on 2 cores.
bench:
	$(GO) run ./cmd/bench

# bench-go runs every Go benchmark of the module.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# tokens prints the tool-definition tokens of one request per mode for every
# shared catalog (docs/BENCHMARKS.md has the table).
tokens: build
	bin/worker tokens ../shared/catalogs/*.json

clean:
	rm -rf bin conformance/results
