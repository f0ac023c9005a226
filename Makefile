# ioparallax: every set-up step lives here, so that `make demo` and `make test`
# work on a fresh Debian machine and in CI (a clean clone, nothing pre-installed).
# Each step is idempotent: it installs only what is missing.

SHELL        := /bin/bash
PYTHON       ?= python3
VENV         := .venv
VPY          := $(VENV)/bin/python
BUILD        := .build
SCENARIO     ?= zero-heavy
PYTEST_ARGS  ?=
DEMO_ARGS    ?=

# Debian packages and the command each one provides (checked before installing).
DEB_PACKAGES := prometheus prometheus-alertmanager prometheus-node-exporter fio docker-compose fdisk util-linux mount openssl victoria-metrics chromium poppler-utils
DEB_COMMANDS := prometheus promtool prometheus-alertmanager prometheus-node-exporter fio docker-compose sfdisk losetup partx amtool openssl victoria-metrics chromium pdftoppm

# Stock vcsim, the last version that `go install` accepts (see docs/vcenter.md).
VCSIM_VERSION := v0.46.3

.PHONY: help deps deps-system deps-python deps-go lint test test-fast test-explore test-busy demo report bench bench-deps rules dashboards clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

# The three parts need nothing of each other (the venv and pip use the base system's Python, the
# Go build the Go toolchain), so they run side by side: on a fresh machine apt's downloads and
# unpacking overlap pip's and Go's (about 40 s of the install).
deps: ## install everything that is missing
	@$(MAKE) --no-print-directory -j3 --output-sync=target deps-system deps-python deps-go

deps-system: ## Debian packages: Prometheus, Alertmanager, node_exporter, fio, docker-compose, VictoriaMetrics, Chromium, poppler-utils
	@missing=0; for c in $(DEB_COMMANDS); do command -v $$c >/dev/null || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  echo ">> installing Debian packages: $(DEB_PACKAGES)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES) >/dev/null; \
	fi

deps-python: $(VENV)/.installed ## Python virtualenv with the project, its test deps and the linters

$(VENV)/.installed: pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	@$(VPY) -m pip install -q --upgrade pip
	@$(VPY) -m pip install -q -e '.[test,dashboards,lint]'
	@touch $@

deps-go: $(BUILD)/vcsim-scenario $(BUILD)/vcsim ## the scenario vCenter simulator and stock vcsim

$(BUILD)/vcsim-scenario: $(wildcard ioparallax/simulators/vcenter/*.go ioparallax/simulators/vcenter/go.mod ioparallax/simulators/vcenter/go.sum)
	@mkdir -p $(BUILD)
	@if [ -f ioparallax/simulators/vcenter/go.mod ]; then \
	  echo ">> building the scenario vCenter simulator"; \
	  cd ioparallax/simulators/vcenter && go build -o $(CURDIR)/$(BUILD)/vcsim-scenario . ; \
	else touch $@; fi

$(BUILD)/vcsim:
	@mkdir -p $(BUILD)
	@echo ">> installing stock vcsim $(VCSIM_VERSION) from the Go module proxy"
	@GOBIN=$(CURDIR)/$(BUILD) go install github.com/vmware/govmomi/vcsim@$(VCSIM_VERSION)

# ruff and mypy read their settings from pyproject.toml ([tool.ruff], [tool.mypy]); go vet and gofmt
# check the scenario vCenter simulator with the same Go toolchain deps-go builds it with.
lint: deps-python ## ruff (lint, format check) and mypy on the Python code, go vet and gofmt on the Go simulator
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy
	cd ioparallax/simulators/vcenter && go vet ./...
	@cd ioparallax/simulators/vcenter && unformatted=$$("$$(go env GOROOT)/bin/gofmt" -l .) && \
	  if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted: $$unformatted" >&2; exit 1; fi

# The unit tests mostly wait on the real processes they start (Prometheus, promtool, simulators,
# exporters), not on a core: TEST_WORKERS pytest-xdist workers run them. The e2e tests run beside
# them in one more pytest process from the start (their stacks must age: rate windows, vCenter
# samples, the scaling ramp), their output kept in .run/test-e2e.log and shown once the unit tests
# are done. Each process picks ports from its own share (IOPARALLAX_PORT_SHARE, process.free_port).
# Exit status 5 (no test selected, e.g. PYTEST_ARGS=tests/exporters/fio has no e2e test) counts as passed
# unless neither process ran a test. The tests last from milliseconds to ~30 s: --dist worksteal
# lets an idle worker take queued tests from a busy one instead of waiting out a fixed share.
TEST_WORKERS ?= 4

test: deps ## install what is missing, then run every test (unit tests in TEST_WORKERS workers beside the e2e tests)
	@mkdir -p .run; \
	IOPARALLAX_PORT_SHARE=1/2 $(VPY) -m pytest -m e2e --durations=20 $(PYTEST_ARGS) > .run/test-e2e.log 2>&1 & e2e=$$!; \
	echo ">> e2e tests started in the background (pid $$e2e, output: .run/test-e2e.log)"; \
	IOPARALLAX_PORT_SHARE=0/2 $(VPY) -m pytest -m 'not e2e' -n $(TEST_WORKERS) --dist worksteal --durations=10 $(PYTEST_ARGS); unit=$$?; \
	echo ">> unit tests done (exit $$unit); the e2e tests' output:"; \
	tail -n +1 --pid=$$e2e -f .run/test-e2e.log; wait $$e2e; e2e_rc=$$?; \
	echo ">> unit tests: exit $$unit; e2e tests: exit $$e2e_rc"; \
	if [ $$unit = 5 ] && [ $$e2e_rc = 5 ]; then exit 5; fi; \
	[ $$unit = 0 -o $$unit = 5 ] && [ $$e2e_rc = 0 -o $$e2e_rc = 5 ]

test-fast: deps-python ## unit tests only (no e2e stacks), in TEST_WORKERS workers
	$(VPY) -m pytest -m 'not e2e' -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The gate's property tests run the same examples every time (tests/conftest.py); this searches
# for new ones (random, 2,000 examples a test) and prints what to pin with @example.
test-explore: deps-python ## property tests with random examples (Hypothesis, 2,000 a test): finds inputs the gate's fixed examples miss
	IOPARALLAX_HYPOTHESIS=explore $(VPY) -m pytest -m 'not e2e' -n $(TEST_WORKERS) -p no:cacheprovider \
	  $$(grep -rlE '^from hypothesis import|^import hypothesis' tests --include='test_*.py') $(PYTEST_ARGS)

# The busy-machine check: the unit groups whose tests wait on timers, deadlines, sessions and
# background threads, run while BUSY_NEIGHBOURS CPU-bound processes compete for the cores (CI runs
# at load 15: the e2e stacks beside 4 unit workers). The neighbours are stopped by PID when the
# tests end, pass or fail (or make is interrupted).
BUSY_NEIGHBOURS ?= 8
BUSY_GROUPS     ?= tests/exporters/vcenter tests/exporters/prism tests/exporters/stargate tests/exporters/common \
                   tests/exporters/test_exporter_imports.py tests/exporters/fio tests/exporters/diskspd \
                   tests/exporters/vdbench tests/check/test_vdbench_check.py tests/simulators/vcenter \
                   tests/simulators/prism tests/simulators/stargate tests/simulators/guest tests/simulators/test_process.py \
                   tests/test_pipes.py tests/test_version.py tests/test_yamlconf.py tests/test_durations.py \
                   tests/report tests/bench
test-busy: deps ## the timing-sensitive unit groups (BUSY_GROUPS) with BUSY_NEIGHBOURS CPU-bound neighbours running
	@pids=""; trap 'kill $$pids 2>/dev/null; wait $$pids 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	for i in $$(seq $(BUSY_NEIGHBOURS)); do sh -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	echo ">> $(BUSY_NEIGHBOURS) CPU-bound neighbours running (pids$$pids)"; \
	$(VPY) -m pytest -m 'not e2e' -n $(TEST_WORKERS) --dist worksteal --durations=10 $(BUSY_GROUPS) $(PYTEST_ARGS); rc=$$?; \
	echo ">> load average at the end: $$(cut -d' ' -f1-3 /proc/loadavg)"; exit $$rc

demo: deps ## start the whole stack on 127.0.0.1 with a simulated cluster (SCENARIO=a or a,b: one cluster each; DEMO_ARGS=--quick-alerts)
	$(VENV)/bin/ioparallax-demo --scenario $(SCENARIO) $(DEMO_ARGS)

REPORT_PROMETHEUS ?= http://127.0.0.1:9090
REPORT_START      ?= -30m
report: deps-python ## the PoC report of the running demo: .run/report.html (REPORT_PROMETHEUS=..., REPORT_START=-30m)
	@mkdir -p .run
	$(VENV)/bin/ioparallax-report --prometheus $(REPORT_PROMETHEUS) --start=$(REPORT_START) --end now -o .run/report.html
	@echo "report: $(CURDIR)/.run/report.html"

rules: deps-python ## regenerate alerts/*.rules.yml from ioparallax/mixin/config.yml
	$(VPY) -m ioparallax.mixin.cli rules

dashboards: deps-python ## regenerate dashboards/*.json from ioparallax/mixin/config.yml
	$(VPY) -m ioparallax.mixin.cli dashboards

# Every bench runs, even after one missed (each prints its figures, targets and verdict), then
# the target fails if one missed. bench/gate.py is the benches' shared module, not a bench. A run
# with arguments is written with commas for spaces: bench/vcenter_scrape.py runs twice more, for the
# paired steady scrapes on stock vcsim at 1,000 VMs (80 s at load 1.4, 34 s of it stock vcsim
# starting; 5-7 min at load 17-34) and for the inventory at 5,000 VMs (~16 min, most of it stock
# vcsim starting).
BENCHES    := $(filter-out bench/gate.py,$(wildcard bench/*.py))
BENCH_RUNS ?= $(BENCHES) bench/vcenter_scrape.py,--stock bench/vcenter_scrape.py,--inventory

bench-deps: deps-python ## install vmware_exporter 0.18.4 (PyPI) into .build/vmware-exporter-venv for bench/vcenter_scrape.py (not a project dependency)
	$(VPY) bench/vcenter_scrape.py --bench-deps

bench: deps ## run the benchmarks in bench/; fails if one misses a target (after running them all)
	@missed=""; for b in $(BENCH_RUNS); do cmd=$$(echo "$$b" | tr , ' '); echo ">> $$cmd"; \
	  $(VPY) $$cmd || missed="$$missed $$cmd;"; done; \
	if [ -n "$$missed" ]; then echo ">> benches that missed a target:$$missed"; exit 1; fi; \
	echo ">> every bench met its targets"

clean: ## remove the virtualenv, build outputs and demo state
	rm -rf $(VENV) $(BUILD) .run
