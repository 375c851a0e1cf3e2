# terp's tasks. `make example` sets up this machine and runs the example
# analysis; `make test` runs every test. See README.md.

GO      ?= go
BIN     := bin/terp
PREFIX  ?= $(HOME)/.local
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/terpdev/terp/internal/cli.version=$(VERSION)
# What the local sandbox needs from Debian/Ubuntu, and what the tests need
# besides (tmux drives the terminal UI test; postgresql's initdb and pg_ctl
# give the PostgreSQL tests a throwaway cluster when TERP_TEST_POSTGRES
# names no server, see internal/postgres/pgtest; nbformat, nbclient and
# ipykernel validate and run the exported notebook, see
# internal/export/jupyter_test.go, and terptest.JupyterDebs says the same;
# ipykernel, with the jupyter_client it depends on, is also the peer kernel
# of BenchmarkKernelVsJupyter in internal/kernel and the stock server's
# kernel of TestJupyterClientsAgainstStockServer in internal/cli;
# chromium opens the web pages terp writes, the exported conversation and
# the batch report, see internal/terptest/browsertest; python3-venv makes
# the virtual environments of the tests that run Python clients from PyPI,
# Open WebUI's executor and jupyter_server, see terptest.PythonVenv).
# util-linux brings prlimit, which limits root's sandboxes; python3-pip is
# what %pip install runs in the sandbox (the allowlist mode's package index).
DEBS      := bubblewrap util-linux python3 python3-numpy python3-pandas python3-matplotlib python3-pip
TEST_DEBS := $(DEBS) tmux postgresql python3-nbformat python3-nbclient python3-ipykernel python3-venv chromium
GOLANGCI := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# The npm package of the tests that run real Node.js clients (TestNodeSDK:
# npm's openai; TestMCPInspector: the MCP Inspector's CLI; TestJupyterClients:
# JupyterLab's @jupyterlab/services with ws; TestLibreChatClient: the code
# tool of @librechat/agents, with node-fetch 2 beside it), the oldest
# Node.js they run on (the Inspector 2 needs 22.19; Debian 12's nodejs is
# 18), and the one node-deps falls back on. terptest.NodeMin says the same.
NODE_PKG     := testdata/node
NODE_MIN     := 22.19
NODE_RUNTIME := 22.23.5
# The npm package of the Node.js clients that need Node.js 24
# (TestLibreChatSignedClient: the newest @librechat/agents, which sends
# LibreChat's signed token), with its own runtime. terptest.Node24Min says
# the same.
NODE24_PKG     := testdata/node24
NODE24_MIN     := 24.0
NODE24_RUNTIME := 24.22.3

.PHONY: build test test-unprivileged lint fmt bench loadtest soak eval eval-check install deps test-deps node-deps node-pkg apt-install example clean docker-test-image

# build and install make a static binary (CGO_ENABLED=0), as the
# kubernetes image does: terp needs no C library, and a binary linked
# against libc spends 1 to 3 ms loading it at every start, a tenth to a
# fifth of what terp version takes (docs/benchmarks.md, "Start-up").
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/terp

install:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(PREFIX)/bin/terp ./cmd/terp
	@echo "installed $(PREFIX)/bin/terp"

# deps installs the sandbox's packages that are missing (apt-get; sudo when
# not root); test-deps the tests' too, and the Node client tests'. A machine
# where that last part fails still runs the other tests: the Node tests then
# skip, saying so (and .ci/run fails).
deps:
	@$(MAKE) --no-print-directory apt-install PKGS="$(DEBS)"

test-deps:
	@$(MAKE) --no-print-directory apt-install PKGS="$(TEST_DEBS)"
	@$(MAKE) --no-print-directory node-deps || echo "node-deps failed (above): the Node client tests will skip"

# node-deps installs Debian's nodejs and npm when there is no npm (checked
# by command: NodeSource's nodejs brings its own npm and conflicts with
# Debian's), then each npm package of the tests (node-pkg): $(NODE_PKG) on
# Node.js $(NODE_MIN) or later, $(NODE24_PKG) on $(NODE24_MIN) or later.
node-deps:
	@command -v npm >/dev/null || $(MAKE) --no-print-directory apt-install PKGS="nodejs npm"
	@$(MAKE) --no-print-directory node-pkg PKG=$(NODE_PKG) MIN=$(NODE_MIN) RUNTIME=$(NODE_RUNTIME)
	@$(MAKE) --no-print-directory node-pkg PKG=$(NODE24_PKG) MIN=$(NODE24_MIN) RUNTIME=$(NODE24_RUNTIME)

# node-pkg installs Node.js $(RUNTIME) from npm's node-linux-* package into
# $(PKG)/runtime when neither the machine's node nor one installed there
# before is $(MIN) or later, and $(PKG)'s npm packages from
# package-lock.json when they changed.
node-pkg:
	@recent() { "$$1" -e 'const [a, b] = process.versions.node.split(".").map(Number), [x, y] = "$(MIN)".split(".").map(Number); process.exit(a > x || (a === x && b >= y) ? 0 : 1)' 2>/dev/null; }; \
	if ! recent node && ! recent $(PKG)/runtime/node_modules/.bin/node; then \
		case $$(uname -m) in x86_64) arch=x64;; aarch64) arch=arm64;; *) echo "no Node.js $(RUNTIME) for $$(uname -m) on npm"; exit 1;; esac; \
		echo "Node.js $$(node --version 2>/dev/null || echo missing) is older than $(MIN): installing node-linux-$$arch@$(RUNTIME) into $(PKG)/runtime"; \
		npm install --prefix $(PKG)/runtime --no-save --no-package-lock --no-audit --no-fund node-linux-$$arch@$(RUNTIME); \
	fi
	@[ $(PKG)/node_modules/.package-lock.json -nt $(PKG)/package-lock.json ] || \
		npm ci --prefix $(PKG) --no-audit --no-fund

apt-install:
	@missing=""; for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "please install:$$missing"; exit 1; fi; \
	sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	echo "installing:$$missing"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing

# example asks the seed's question about examples/sales.csv. Point terp at
# your model first (TERP_BASE_URL, TERP_MODEL, and a key if the server needs one).
example: deps build
	$(BIN) ask -f examples/sales.csv "$$(cat examples/question.txt)"

# go test shows nothing a passing package printed, so a test that skipped
# for want of something (a Docker daemon, PostgreSQL, root) could go unseen:
# terptest appends its notice to $TERP_TEST_NOTICES as well, and test prints
# the notices after the run.
# -timeout: go test's 10 minutes per package is too little for internal/cli
# (terminal sessions, the MCP Inspector, every command against real
# sandboxes) beside the other packages on two busy cores.
test: test-deps
	@notices=$$(mktemp); echo "$(GO) test -race -timeout 30m ./..."; \
	TERP_TEST_NOTICES=$$notices $(GO) test -race -timeout 30m ./...; status=$$?; \
	if [ -s $$notices ]; then echo; sort -u $$notices; echo; fi; \
	rm -f $$notices; exit $$status
	@if [ "$$(id -u)" -eq 0 ]; then $(MAKE) --no-print-directory test-unprivileged; fi

# test-unprivileged runs the adversarial suite again as nobody, the way most
# people run terp (make test does it after the root pass).
test-unprivileged:
	internal/adversarial/testdata/run-unprivileged.sh

# docker-test-image builds the image the Docker backend's tests run, from
# Debian's packages through debootstrap (no registry, no PyPI; about three
# minutes, root). It does nothing when the image exists. Without a daemon the
# Docker tests skip, saying so.
DOCKER_TEST_IMAGE ?= $(or $(TERP_TEST_DOCKER_IMAGE),terp-python:debian12)
docker-test-image:
	internal/sandbox/docker/testdata/build-image.sh $(DOCKER_TEST_IMAGE)

# kubernetes-sandbox-image builds the image of the kubernetes backend's
# sandbox pods, and of terp serve in the cluster (examples/kubernetes): Debian
# packages through debootstrap plus terp from this tree, no registry, no PyPI
# (about three minutes, root, a Docker daemon). OUT=FILE also writes it as an
# archive to load into a cluster; see docs/kubernetes.md.
KUBERNETES_SANDBOX_IMAGE ?= terp-sandbox:debian12
.PHONY: kubernetes-sandbox-image
kubernetes-sandbox-image:
	examples/kubernetes/image/build.sh $(KUBERNETES_SANDBOX_IMAGE)

# lint runs gofmt, go vet and golangci-lint (.golangci.yml), the latter built
# from the module proxy at a pinned version on first use.
lint:
	@test -z "$$(gofmt -l cmd internal)" || { gofmt -l cmd internal; echo "gofmt: files above need formatting (make fmt)"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(GOLANGCI) run ./...

fmt:
	gofmt -w cmd internal

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# loadtest puts the terp serve binary, built from this tree, under load:
# waves of concurrent three-step code-interpreter conversations against a
# scripted model that takes 300 ms a reply, on the local backend and through
# terp sandbox serve, at 8, 64 and 256 conversations at once, and 64 Jupyter
# kernels open at once (see "terp serve under load" in docs/benchmarks.md). It
# takes minutes and the whole machine: run it on a quiet one (make bench skips
# it). LOAD picks the runs, as -bench's pattern below BenchmarkLoad and
# BenchmarkLoadJupyter: LOAD=local/n=8 is the smallest.
# TERP_LOAD_PREWARM (none by default) and TERP_LOAD_IDLE_PAUSE (30s) are
# passed through.
LOAD ?= .
loadtest:
	TERP_LOADTEST=1 $(GO) test -run '^$$' -bench '^BenchmarkLoad(Jupyter)?$$/$(LOAD)' -benchtime 1x -timeout 0 ./internal/serve/loadtest/

# soak runs 16 clients through terp serve for SOAK (10m), one conversation
# after another, and fails on growth of its threads, open files, goroutines
# (when it exposes them), sandboxes or memory. SOAK_SANDBOX is local or
# cpuos; TERP_SOAK_CLIENTS and TERP_SOAK_INTERVAL (10s) are passed through.
SOAK         ?= 10m
SOAK_SANDBOX ?= local
soak:
	TERP_LOADTEST=1 TERP_SOAK_DURATION=$(SOAK) $(GO) test -run '^$$' -bench '^BenchmarkSoak$$/^$(SOAK_SANDBOX)$$' -benchtime 1x -timeout 0 ./internal/serve/loadtest/

# eval runs terp's evaluation suite (examples/eval, see docs/eval.md) with
# the configured model (TERP_MODEL, TERP_BASE_URL, or the config file), or
# with each of MODELS=a,b,c, each case REPEAT times, and writes
# $(EVAL_OUT): results.jsonl, junit.xml, report.md (the table to read),
# report.html (the same run as a page) and the files each run saved. Runs that fail are the measurement, not an
# error: it exits 0 once the report is written. JOBS cases run at once.
EVAL_OUT ?= eval-results/$(shell date -u +%Y-%m-%d)
MODELS   ?=
REPEAT   ?= 1
JOBS     ?= 4
eval: build
	@mkdir -p $(EVAL_OUT)
	@python3 examples/eval/make_data.py --large
	@$(BIN) batch -j $(JOBS) --repeat $(REPEAT) $(if $(MODELS),--models $(MODELS)) --max-time 10m \
		--out $(EVAL_OUT)/results.jsonl --junit $(EVAL_OUT)/junit.xml --markdown $(EVAL_OUT)/report.md --html $(EVAL_OUT)/report.html \
		--artifacts $(EVAL_OUT)/artifacts examples/eval/cases.jsonl; status=$$?; \
	if [ $$status -le 1 ]; then echo "the report: $(EVAL_OUT)/report.md"; exit 0; fi; exit $$status

# eval-check runs the suite as eval does, with an oracle instead of a model:
# a scripted model that runs each case's reference solution
# (examples/eval/solutions/<id>.py) and answers with what it printed. A case
# its own solution cannot pass is broken. Then it runs the suite with scripted
# models that cheat (recall published values, hedge then invent, paste every
# summary, answer a constant), which must pass (almost) nothing. make test runs
# both too.
eval-check:
	$(GO) test -count=1 -run '^TestEval(Oracle|Cheaters|AnswersAsWritten)$$' -v ./internal/cli/

clean:
	rm -rf bin
