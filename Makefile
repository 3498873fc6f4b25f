# Tender: `make run` and `make test` work on a fresh Debian 12 with Swift, as root, with nothing else done.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

export TENDER_DATA_DIR ?= $(CURDIR)/.tender
SWIFT_FLAGS ?=
ifeq ($(CI),true)
SWIFT_FLAGS += -Xswiftc -warnings-as-errors
endif

.PHONY: deps build release release-check run test cluster-test chaos fuzz bench db-start db-stop db-check clean help

help:
	@echo "make run    install, build, start local PostgreSQL, migrate, serve on 127.0.0.1:8080"
	@echo "make test   install, build, run every test against a real PostgreSQL"
	@echo "make bench  print benchmark figures"
	@echo "make cluster-test  etcd + Patroni + HAProxy + three nodes on loopback: failover under load, nothing lost"
	@echo "make chaos  faults on that cluster under load, a measure each"
	@echo "make release-check  build the release binary and prove it runs without the Swift toolchain"
	@echo "make fuzz   fuzz token/CMS parsing with libFuzzer (FUZZ_SECONDS, default 600)"
	@echo "make db-stop  stop the local PostgreSQL cluster"

deps:
	@scripts/deps.sh

build: deps
	swift build $(SWIFT_FLAGS)

# The Swift runtime and Foundation are linked in, so the binary runs on a server without the toolchain
# (scripts/check-release.sh proves it: `make release-check`).
release: deps
	swift build -c release --static-swift-stdlib $(SWIFT_FLAGS)

release-check: release
	scripts/check-release.sh

db-start: deps
	@scripts/pg.sh start

# Before any build: a PostgreSQL port held by someone else is reported now, with the fix, not after
# minutes of compiling. Nothing to check when TENDER_DATABASE_URL names a server.
db-check: deps
	@if [ -z "$${TENDER_DATABASE_URL:-}" ]; then scripts/pg.sh check; fi

db-stop:
	@scripts/pg.sh stop

run: db-check release
	@if [ -z "$${TENDER_DATABASE_URL:-}" ]; then
	  scripts/pg.sh start
	  scripts/pg.sh createdb tender
	  export TENDER_DATABASE_URL="$$(scripts/pg.sh url tender)"
	  trap 'scripts/pg.sh stop' EXIT
	fi
	.build/release/tender migrate
	.build/release/tender sandbox bootstrap
	# Development only: trust the sandbox Apple stand-in that bootstrap wrote (production never does
	# unless TENDER_APPLE_ROOTS is set); an operator's own TENDER_APPLE_ROOTS wins.
	export TENDER_APPLE_ROOTS="$${TENDER_APPLE_ROOTS:-$$TENDER_DATA_DIR/sandbox/root.pem}"
	# The demo store (sandbox only): http://127.0.0.1:8080/demo/, the console at /console/.
	export TENDER_DEMO="$${TENDER_DEMO:-on}"
	echo "tender: demo store at http://$${TENDER_LISTEN:-127.0.0.1:8080}/demo/ · console at /console/"
	.build/release/tender serve

test: deps db-check
	@# Tidy rules first (line width, function length, C imports, the clock, typed JSON): seconds, not minutes.
	scripts/tidy.sh
	started=0
	if [ -z "$${TENDER_DATABASE_URL:-}" ]; then
	  scripts/pg.sh status | grep -q running || started=1
	  scripts/pg.sh start
	  scripts/pg.sh prune
	  scripts/pg.sh createdb tender_test --fresh
	  export TENDER_DATABASE_URL="$$(scripts/pg.sh url tender_test)"
	  restart="$(CURDIR)/scripts/pg.sh restart"
	  if [ $$started = 1 ]; then trap 'scripts/pg.sh stop' EXIT; fi
	fi
	export TENDER_TEST_DATABASE_URL="$$TENDER_DATABASE_URL"
	swift build --build-tests $(SWIFT_FLAGS)
	# Everything runs in parallel first; the test that restarts PostgreSQL then runs alone, so the
	# restart cannot break statements of unrelated tests.
	swift test --skip-build
	if [ -n "$${restart:-}" ]; then
	  TENDER_TEST_PG_RESTART="$$restart" swift test --skip-build --filter poolAndListenerSurviveADatabaseRestart
	fi
	# pg.sh's rules (saved port, taken port, prune/createdb only on this checkout's cluster), on two
	# throw-away clusters of its own.
	scripts/pg-selftest.sh
	# Webhooks end to end: real serve processes, a receiver verifying with the Standard Webhooks library.
	scripts/webhooks-test.sh
	# The running server checked against openapi.yaml by Schemathesis, for a bounded time.
	scripts/schemathesis.sh $${SCHEMATHESIS_SECONDS:-60}
	# The browser client in headless Chromium (demo store, Apple Pay JS with a stub, console).
	scripts/browser-test.sh
	# A short libFuzzer run over token/CMS/X.509 parsing after the tests (`make fuzz` runs longer).
	scripts/fuzz.sh $${FUZZ_TEST_SECONDS:-20}

# CONTRACT §10: the deploy/cluster/ topology on loopback (ports 55000-55039), a PostgreSQL primary and a
# Tender node killed under load; prints `cluster: acknowledged N payments, lost 0, charged twice 0, failover S s`.
cluster-test: release
	scripts/cluster-test.sh

# Faults on the same cluster, one measure each: kill -9 of a node and PostgreSQL immediate stop under load,
# slowloris and slow-body clients, an app-database partition (a node in a network namespace, nftables;
# as root) under load, and Schemathesis through HAProxy during that partition with zero 5xx.
# CHAOS_ONLY=partition,schemathesis runs a subset (scripts/cluster-test.sh).
chaos: release
	scripts/cluster-test.sh chaos

fuzz: deps
	scripts/fuzz.sh $${FUZZ_SECONDS:-600}

bench: release
	@scripts/bench.sh

clean:
	swift package clean
