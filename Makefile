# Hookwarden: `make help` lists the targets.
SHELL   := /bin/bash
BIN     := bin/hookwarden
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO      ?= go
FUZZTIME ?= 60s
FUZZTIME_CI ?= 3s

.PHONY: help build run test race vet lint vectors fuzz fuzz-ci bench bench-quick bench-go torture torture-short clean install uninstall deb

# install/uninstall: DESTDIR stages elsewhere (packaging, tests).
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
UNITDIR ?= /etc/systemd/system
CONFDIR ?= /etc/hookwarden
DOCDIR  ?= $(PREFIX)/share/doc/hookwarden
DESTDIR ?=
# deb: nfpm from the Go module proxy (v2.44.1 is the newest whose
# dependencies all resolve there). DEB_VERSION: git describe made Debian-valid
# (v1.2.3-4-gabc -> 1.2.3+4+gabc; no tag -> 0.0.0~git.HASH).
NFPM_VERSION ?= v2.44.1
NFPM    ?= $(shell $(GO) env GOPATH)/bin/nfpm
DEB_ARCH ?= $(shell $(GO) env GOARCH)
DEB_VERSION ?= $(shell echo '$(VERSION)' | sed -E 's/^v//; /^[0-9]+\./!s/^/0.0.0~git./; s/-/+/g')

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# A first build downloads the modules and compiles the pure-Go SQLite
# (several minutes, silent): build says so rather than look hung.
build: ## build the CGO-free binary into bin/
	@test -e $(BIN) || echo "building $(BIN): the first build downloads modules and compiles SQLite in Go, a few minutes without output (go build -v shows progress)" >&2
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hookwarden

run: build ## serve the built-in demo in the foreground (database under ./data/)
	./$(BIN) serve --demo

# -timeout: a package's binary (sqlitestore, cmd/hookwarden: 5-6 min alone under
# -race) must not hit go test's 10 min default on a machine shared with other builds.
test: ## run every test with the race detector
	$(GO) test -race -shuffle=on -count=1 -timeout=30m ./...

vet: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet ## alias of vet (golangci-lint is not available offline)

vectors: ## regenerate the signature test vectors (internal/vectors/testdata/vectors.json)
	$(GO) generate ./internal/vectors

fuzz-ci: ## run every fuzz target briefly (FUZZTIME_CI each)
	@./scripts/fuzz.sh $(FUZZTIME_CI)

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@./scripts/fuzz.sh $(FUZZTIME)

# Benchmarks (docs/performance.md). The harness (cmd/hookbench) measures an
# ack-only baseline and the real `hookwarden serve` with one load generator on
# loopback, alternating them, and writes BENCH_OUT. PROFILE=dir also writes
# CPU and heap profiles of serve; BENCH_FLAGS passes anything else. The
# history phase builds a store of HISTORY claims (default 10 M, 1 M of them
# with payloads; bench-quick: 200 k) and compares it with a fresh one, on
# SQLite (with a copy compacted by `hookwarden backup` too), then on
# PostgreSQL when its binaries are installed:
# HISTORY=1000000 HISTORY_PAYLOADS=100000 for a shorter run.
BENCH_OUT   ?= bin/bench.json
BENCH_FLAGS ?=
BENCH_ARGS   = -hookwarden $(BIN) -out $(BENCH_OUT) $(if $(PROFILE),-profile $(PROFILE)) \
	$(if $(HISTORY),-history-claims $(HISTORY)) $(if $(HISTORY_PAYLOADS),-history-payloads $(HISTORY_PAYLOADS)) $(BENCH_FLAGS)
bench: build ## full benchmark (about 50 min): 10 s cells, 60 s end-to-end and sustained, body sizes, history at 10 M claims; Go benchmarks
	$(GO) build -o bin/hookbench ./cmd/hookbench
	./bin/hookbench $(BENCH_ARGS)
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-quick: build ## quick benchmark (about 4 min): 3 s cells, 10 s end-to-end and sustained, no body sweep, the PostgreSQL cell, history at 200 k claims
	$(GO) build -o bin/hookbench ./cmd/hookbench
	./bin/hookbench -quick $(BENCH_ARGS)

bench-go: ## the Go benchmarks of the hot paths only
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Torture tests (test/torture): the real binary under kill -9, power loss,
# a full disk, a destination outage, redrives, hostile clients and a burst.
# Mount scenarios need root. Not under -race (it skips itself in `make test`).
TORTURE_TABLE ?= $(CURDIR)/bin/torture.txt
TORTURE_FLAGS ?=
torture-short: ## short forms of the torture tests on both stores (about 5.5 min on an idle 2-core machine, 9 under load; CI)
	@mkdir -p bin; rm -f $(TORTURE_TABLE); HOOKWARDEN_TORTURE=short HOOKWARDEN_TORTURE_TABLE=$(TORTURE_TABLE) \
	  $(GO) test -count=1 -timeout=20m $(TORTURE_FLAGS) ./test/torture/; rc=$$?; cat $(TORTURE_TABLE) 2>/dev/null; exit $$rc

torture: ## long forms of the torture tests on both stores and their summary table
	@mkdir -p bin; rm -f $(TORTURE_TABLE); HOOKWARDEN_TORTURE=long HOOKWARDEN_TORTURE_TABLE=$(TORTURE_TABLE) \
	  $(GO) test -count=1 -timeout=60m $(TORTURE_FLAGS) ./test/torture/; rc=$$?; cat $(TORTURE_TABLE) 2>/dev/null; exit $$rc

.PHONY: rules
rules: ## check and unit-test the Prometheus alert rules (promtool, Debian package prometheus)
	promtool check rules deploy/prometheus/hookwarden.rules.yml
	cd deploy/prometheus && promtool test rules hookwarden.rules.test.yml

clean: ## remove build output
	rm -rf bin dist

install: ## install binary, systemd units (service, sockets: enabled) and, if absent, /etc/hookwarden/config.yaml (never overwritten)
	@test -x $(BIN) || $(MAKE) build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/hookwarden
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/local/bin/hookwarden|$(BINDIR)/hookwarden|' -e 's|/usr/share/doc/hookwarden|$(DOCDIR)|' \
		systemd/hookwarden.service > $(DESTDIR)$(UNITDIR)/hookwarden.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/hookwarden.service
	install -m 0644 systemd/hookwarden.socket systemd/hookwarden-admin.socket $(DESTDIR)$(UNITDIR)/
	install -d -m 0755 $(DESTDIR)$(CONFDIR)
	install -d -m 0700 $(DESTDIR)$(CONFDIR)/credentials
	@if [ -e $(DESTDIR)$(CONFDIR)/config.yaml ]; then \
		echo "kept your $(CONFDIR)/config.yaml (the new example: $(DOCDIR)/examples/config.systemd.yaml)"; \
	else sed 's|/usr/share/doc/hookwarden|$(DOCDIR)|' packaging/config.yaml > $(DESTDIR)$(CONFDIR)/config.yaml; \
		chmod 0644 $(DESTDIR)$(CONFDIR)/config.yaml; fi
	install -D -m 0644 config.example.yaml $(DESTDIR)$(DOCDIR)/examples/config.example.yaml
	sed 's|/usr/share/doc/hookwarden|$(DOCDIR)|' packaging/config.yaml > $(DESTDIR)$(DOCDIR)/examples/config.systemd.yaml
	chmod 0644 $(DESTDIR)$(DOCDIR)/examples/config.systemd.yaml
	install -D -m 0644 docs/operations.md $(DESTDIR)$(DOCDIR)/operations.md
	install -D -m 0644 docs/forensics.md $(DESTDIR)$(DOCDIR)/forensics.md
	install -D -m 0644 docs/reference.md $(DESTDIR)$(DOCDIR)/reference.md
	install -D -m 0644 docs/security.md $(DESTDIR)$(DOCDIR)/security.md
	install -D -m 0644 docs/scale-out.md $(DESTDIR)$(DOCDIR)/scale-out.md
	install -D -m 0644 docs/backfill.md $(DESTDIR)$(DOCDIR)/backfill.md
	install -D -m 0644 docs/messaging.md $(DESTDIR)$(DOCDIR)/messaging.md
	install -D -m 0644 docs/design.md $(DESTDIR)$(DOCDIR)/design.md
	install -D -m 0644 docs/performance.md $(DESTDIR)$(DOCDIR)/performance.md
	install -D -m 0644 systemd/command-destinations.conf $(DESTDIR)$(DOCDIR)/examples/command-destinations.conf
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; \
		systemctl enable hookwarden.socket hookwarden-admin.socket; fi
	@echo "installed. Next: edit $(CONFDIR)/config.yaml, then: systemctl enable --now hookwarden (docs/operations.md)"

uninstall: ## stop and remove binary and unit; keeps config (/etc/hookwarden) and data (/var/lib/hookwarden)
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl disable --now hookwarden.socket hookwarden-admin.socket hookwarden.service 2>/dev/null || true; fi
	rm -f $(DESTDIR)$(BINDIR)/hookwarden $(DESTDIR)$(UNITDIR)/hookwarden.service \
		$(DESTDIR)$(UNITDIR)/hookwarden.socket $(DESTDIR)$(UNITDIR)/hookwarden-admin.socket
	rm -rf $(DESTDIR)$(DOCDIR)
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
	@echo "removed. Kept $(CONFDIR) and the database (/var/lib/hookwarden, really /var/lib/private/hookwarden)."

deb: ## build the Debian package into dist/ with nfpm (installed from the Go module proxy if missing)
	@test -x $(NFPM) || GOFLAGS= $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	rm -rf dist/deb && mkdir -p dist/deb
	CGO_ENABLED=0 GOOS=linux GOARCH=$(DEB_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/deb/hookwarden ./cmd/hookwarden
	sed 's|/usr/local/bin/hookwarden|/usr/bin/hookwarden|' systemd/hookwarden.service > dist/deb/hookwarden.service
	DEB_VERSION='$(DEB_VERSION)' DEB_ARCH='$(DEB_ARCH)' $(NFPM) package --config packaging/nfpm.yaml --packager deb --target dist/
	@ls -l dist/*.deb
