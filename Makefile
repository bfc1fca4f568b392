# VaultLog — the commands a new user and CI run. `make test` is the README's test command.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build demo test torture replay serve bench-log clean-bench fuzz

# liblmdb-dev provides lmdb.h, liblmdb.so and lmdb.pc for the CLMDB system library target.
deps:
	@if ! pkg-config --exists lmdb; then \
		echo "Installing liblmdb-dev (LMDB headers and pkg-config file)..."; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq liblmdb-dev pkg-config; \
	fi
	@pkg-config --exists lmdb || { echo "error: liblmdb-dev is still missing; install it with 'apt-get install liblmdb-dev'" >&2; exit 1; }

build: deps
	$(SWIFT) build

# The main job: the offline-edit story against the embedded emulator (DEMO_ARGS for options,
# e.g. DEMO_ARGS="--dir /tmp/demo --record demo.json").
demo: build
	$$($(SWIFT) build --show-bin-path)/vaultlog demo $(DEMO_ARGS)

# Every fixture (scenarios and recorded logs), as a table (the test suite runs them too).
replay: build
	$$($(SWIFT) build --show-bin-path)/vaultlog replay Fixtures

# The whole test suite (Swift Testing), debug build. Tests run one at a time: dozens of
# emulators, HTTP clients and child processes at once on two cores starve each other into
# time-outs, and serial is barely slower (about a minute). The kill test and the simulation run
# in processes of their own.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel --skip WriterKillTests --skip SimulationTests
	$(SWIFT) test --skip-build --filter WriterKillTests
	$(SWIFT) test --skip-build --filter SimulationTests

# The long reliability runs: 1,000 SIGKILLs of the writer and 10,000 simulation seeds
# (make test runs 100 and 500).
torture: deps
	$(SWIFT) build --build-tests
	VAULTLOG_KILLS=1000 $(SWIFT) test --skip-build --filter WriterKillTests
	VAULTLOG_SIM_SEEDS=10000 $(SWIFT) test --skip-build --filter SimulationTests

# The Bitwarden-compatible emulator on loopback with a demo account (Ctrl-C stops it).
# PORT=0 picks a free port; FLAVOR=vaultwarden imitates Vaultwarden; ADMIN_TOKEN enables /admin.
serve: deps
	$(SWIFT) run vaultlog serve --port $${PORT:-8087} --flavor $${FLAVOR:-bitwarden} \
		--account $${ACCOUNT:-demo@example.com:demo-password} --iterations $${ITERATIONS:-5000} \
		$${ADMIN_TOKEN:+--admin-token $$ADMIN_TOKEN}

# Event-log throughput, release build (1M events by default; EVENTS=N to change).
bench-log: deps
	cd Benchmarks && $(SWIFT) run -c release vaultlog-bench log --events $${EVENTS:-1000000}

# libFuzzer on the parsers (EncString, envelopes, scenarios, exports, emulator requests), each
# for FUZZ_SECONDS (default 30); Tests/Fuzz is its own package and build (Docs/Reliability.md).
fuzz: deps
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) SWIFT=$(SWIFT) Tests/Fuzz/fuzz.sh
