# RXC: the front door. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/rxc-project/rxc/apps/internal/buildinfo.Version=$(VERSION)
GO_TEST_FLAGS ?= -count=1 -timeout 30m
APPS := provisioner controlplane sensor-agent rxc-dev
# The NATS-facing tests run against the nats-server go.mod pins (the newest
# supported release, in-process) and, through test-nats-compat, against the
# oldest supported release as an external binary (internal/natstest).
NATS_COMPAT_VERSION ?= v2.11.17
NATS_COMPAT_PKGS := ./internal/natstest/... ./adapters/nats/serveradmin/... ./apps/provisioner/app/...
NATS_COMPAT_BIN := $(BIN)/nats-server-$(NATS_COMPAT_VERSION)/nats-server

.PHONY: help build test test-go test-nats-compat test-faults test-long test-web lint check tidy-check generate generate-check vulncheck bench demo demo-clean clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: ## build every binary into bin/
	@mkdir -p $(BIN)
	@for app in $(APPS); do \
		if [ -d apps/$$app ]; then CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/$$app ./apps/$$app || exit 1; fi; \
	done

test: test-go test-nats-compat test-faults test-web ## run every test (Go, the NATS-facing ones again on the oldest nats-server, the fault suite with a nats-server process, then web)

test-go: ## Go unit and integration tests (real PostgreSQL, real nats-server)
	$(GO) test $(GO_TEST_FLAGS) ./... ./proto/... ./sdk/...

test-nats-compat: $(NATS_COMPAT_BIN) ## NATS-facing integration tests against the oldest supported nats-server (NATS_COMPAT_VERSION)
	RXC_NATS_SERVER_BIN=$(abspath $(NATS_COMPAT_BIN)) $(GO) test $(GO_TEST_FLAGS) $(NATS_COMPAT_PKGS)

test-faults: $(NATS_COMPAT_BIN) ## the fault-injection suite with nats-server as a process (so it can be SIGSTOPped): two control planes, one PostgreSQL, a real agent
	RXC_NATS_SERVER_BIN=$(abspath $(NATS_COMPAT_BIN)) $(GO) test $(GO_TEST_FLAGS) -run '^TestFaults$$' ./apps/sensor-agent/app/

# The long PostgreSQL outage: make test runs TestOutageLosesNoOutcome with an
# outage of seconds; this runs it for PG_OUTAGE (10 minutes by default).
PG_OUTAGE ?= 10m
test-long: ## the PostgreSQL outage test at full length (PG_OUTAGE, default 10m): 100 commands, the agent restarted during it, no outcome lost
	RXC_PG_OUTAGE=$(PG_OUTAGE) $(GO) test -count=1 -timeout 40m -v -run '^TestOutageLosesNoOutcome$$' ./apps/sensor-agent/app/

$(NATS_COMPAT_BIN):
	@mkdir -p $(dir $@)
	GOBIN=$(abspath $(dir $@)) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_COMPAT_VERSION)

test-web: build ## web unit, nginx, entrypoint and browser tests (the real-API e2e runs bin/rxc-dev)
	@if [ -f web/package.json ]; then $(MAKE) -C web test; else echo "web: no package.json yet"; fi

lint: ## gofmt, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./... ./proto/... ./sdk/...
	$(GO) tool staticcheck ./... ./proto/... ./sdk/...

tidy-check: ## go.mod and go.sum of every module (root, proto, sdk) are tidy
	@for m in . proto sdk; do \
		cp $$m/go.mod /tmp/rxc-go.mod.bak; cp $$m/go.sum /tmp/rxc-go.sum.bak; \
		(cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; \
		if ! diff -q $$m/go.mod /tmp/rxc-go.mod.bak >/dev/null || ! diff -q $$m/go.sum /tmp/rxc-go.sum.bak >/dev/null; then \
			cp /tmp/rxc-go.mod.bak $$m/go.mod; cp /tmp/rxc-go.sum.bak $$m/go.sum; echo "$$m: go.mod/go.sum not tidy: run go mod tidy there"; exit 1; fi; \
	done

generate: ## regenerate protobuf stubs (needs protoc)
	@if ls proto/*.proto >/dev/null 2>&1 && grep -q '^service' proto/*.proto; then \
		PATH="$$(pwd)/$(BIN)/tools:$$PATH"; mkdir -p $(BIN)/tools; \
		$(GO) build -o $(BIN)/tools/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go && \
		$(GO) build -o $(BIN)/tools/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc && \
		cd proto && PATH="$$PATH" protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative *.proto; \
	fi

generate-check: generate ## generated code is committed and current
	@git diff --exit-code -- proto || (echo "generated code is stale: run make generate and commit"; exit 1)

vulncheck: ## govulncheck (needs the vulnerability database online)
	@$(GO) tool govulncheck ./... || { rc=$$?; if [ $$rc -eq 3 ]; then exit 3; fi; echo "govulncheck could not run (offline?): exit $$rc"; exit $$rc; }

check: lint tidy-check generate-check ## lint + tidy + generated code + dependency rule + vulncheck
	$(GO) test -count=1 ./internal/archtest/
	@$(MAKE) vulncheck

# The fleet benchmark runs nats-server as a process (one file descriptor a
# sensor in the driver instead of two), the release go.mod pins.
NATS_BENCH_VERSION := $(shell $(GO) list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2 2>/dev/null)
NATS_BENCH_BIN := $(BIN)/nats-server-$(NATS_BENCH_VERSION)/nats-server

bench: build $(NATS_BENCH_BIN) ## benchmarks and load drivers; results appended to docs/benchmarks-history.md (RXC_BENCH_SENSORS: fleet size, default 10000; RXC_BENCH_STOP=1: also nats-server stop/restart times, bench/stop)
	RXC_BENCH_NATS_SERVER_BIN=$(abspath $(NATS_BENCH_BIN)) RXC_BENCH_NATS_COMPAT_BIN=$(abspath $(NATS_COMPAT_BIN)) ./scripts/bench.sh

$(NATS_BENCH_BIN):
	@mkdir -p $(dir $@)
	GOBIN=$(abspath $(dir $@)) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_BENCH_VERSION)

# Options of bin/rxc-dev for make demo, e.g. DEMO_FLAGS="-web-addr 127.0.0.1:8800 -sensors 5".
DEMO_FLAGS ?=

demo: ## run the whole system locally (installs Yarn and PostgreSQL when missing; DEMO_FLAGS for rxc-dev)
	./scripts/demo.sh $(DEMO_FLAGS)

demo-clean: ## forget the demo's state (the state folder and its PostgreSQL cluster)
	@if [ -x $(BIN)/rxc-dev ]; then $(BIN)/rxc-dev -clean $(DEMO_FLAGS); else rm -rf .demo; fi

clean:
	rm -rf $(BIN)
