# Hookwarden: `make help` lists the targets.
SHELL   := /bin/bash
BIN     := bin/hookwarden
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO      ?= go
FUZZTIME ?= 60s
FUZZTIME_CI ?= 3s

.PHONY: help build run test race vet lint fuzz fuzz-ci bench clean

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the CGO-free binary into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hookwarden

run: build ## serve the built-in demo in the foreground (database under ./data/)
	./$(BIN) serve --demo

test: ## run every test with the race detector
	$(GO) test -race -shuffle=on -count=1 ./...

vet: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet ## alias of vet (golangci-lint is not available offline)

fuzz-ci: ## run every fuzz target briefly (FUZZTIME_CI each)
	@./scripts/fuzz.sh $(FUZZTIME_CI)

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@./scripts/fuzz.sh $(FUZZTIME)

bench: ## Go benchmarks of the hot paths
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean: ## remove build output
	rm -rf bin dist
