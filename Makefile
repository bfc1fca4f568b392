# VaultLog — the commands a new user and CI run. `make test` is the README's test command.
SWIFT ?= swift
# bash with pipefail: a failing test piped through tee still fails the target.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Every module a target imports must be declared in Package.swift (a target that builds only
# because another one happened to pull the module in is an error).
IMPORT_CHECK := --explicit-target-dependency-import-check error

.PHONY: deps build docs graph example demo test house-rules torture replay serve bench bench-quick bench-build bench-deps bench-log fuzz

# The house rules, kept by .ci/house-rules.py (python3, standard library only): no Sources/ file
# over 400 lines (unless .ci/house-exceptions lists it with a reason), no `default:` in a switch
# over one of our own enums, no compiler warning from our own code (Sources/, Tests/, Examples/,
# Benchmarks/). Warnings are read from the .dia file the compiler keeps per source file, so an
# incremental build that compiled nothing still has its earlier warnings checked.
HOUSE_RULES := python3 .ci/house-rules.py

# The C modules' maps, for tools that load our modules outside SwiftPM (symbolgraph-extract, swiftc).
MODULE_MAPS := -Xcc -fmodule-map-file=Sources/CLMDB/module.modulemap -Xcc -fmodule-map-file=Sources/CArgon2/module.modulemap \
	-Xcc -fmodule-map-file=Sources/CLibCrypto/module.modulemap

# liblmdb-dev provides lmdb.h, liblmdb.so and lmdb.pc for the CLMDB system library target;
# libargon2-dev provides argon2.h, libargon2.so and libargon2.pc for CArgon2 (Argon2id accounts);
# libssl-dev provides OpenSSL's evp.h, libcrypto.so and libcrypto.pc for CLibCrypto (AES-256-CBC).
deps:
	@if ! pkg-config --exists lmdb || ! pkg-config --exists libargon2 || ! pkg-config --exists libcrypto; then \
		echo "Installing liblmdb-dev, libargon2-dev and libssl-dev (LMDB, Argon2 and libcrypto headers and pkg-config files)..." >&2; \
		$(SUDO) apt-get update -qq >&2 && $(SUDO) apt-get install -y -qq liblmdb-dev libargon2-dev libssl-dev pkg-config >&2; \
	fi
	@pkg-config --exists lmdb || { echo "error: liblmdb-dev is still missing; install it with 'apt-get install liblmdb-dev'" >&2; exit 1; }
	@pkg-config --exists libargon2 || { echo "error: libargon2-dev is still missing; install it with 'apt-get install libargon2-dev'" >&2; exit 1; }
	@pkg-config --exists libcrypto || { echo "error: libssl-dev is still missing; install it with 'apt-get install libssl-dev'" >&2; exit 1; }

build: deps
	$(SWIFT) build $(IMPORT_CHECK)

# The main job: the offline-edit story against the embedded emulator (DEMO_ARGS for options,
# e.g. DEMO_ARGS="--dir /tmp/demo --record demo.json").
demo: build
	$$($(SWIFT) build --show-bin-path)/vaultlog demo $(DEMO_ARGS)

# Every fixture (scenarios and recorded logs), as a table (the test suite runs them too).
replay: build
	$$($(SWIFT) build --show-bin-path)/vaultlog replay Fixtures

# The library's DocC catalog (Sources/OfflineSync/OfflineSync.docc) checked against the built
# module: a broken symbol link is an error. HTML in .build/docs/OfflineSync.doccarchive.
DOCS_SYMBOLS := .build/docs/symbol-graphs
docs: build
	@rm -rf $(DOCS_SYMBOLS) && mkdir -p $(DOCS_SYMBOLS)/kit
	$(SWIFT) symbolgraph-extract -module-name OfflineSync -I $$($(SWIFT) build --show-bin-path)/Modules \
		-Xcc -fmodule-map-file=Sources/CLMDB/module.modulemap -Xcc -fmodule-map-file=Sources/CArgon2/module.modulemap -Xcc -fmodule-map-file=Sources/CLibCrypto/module.modulemap \
		-target $$(uname -m)-unknown-linux-gnu -minimum-access-level public -output-dir $(DOCS_SYMBOLS)
	docc convert Sources/OfflineSync/OfflineSync.docc --additional-symbol-graph-dir $(DOCS_SYMBOLS) \
		--fallback-display-name OfflineSync --fallback-bundle-identifier org.vaultlog.OfflineSync \
		--output-path .build/docs/OfflineSync.doccarchive --warnings-as-errors
	$(SWIFT) symbolgraph-extract -module-name VaultLogKit -I $$($(SWIFT) build --show-bin-path)/Modules \
		-Xcc -fmodule-map-file=Sources/CLMDB/module.modulemap -Xcc -fmodule-map-file=Sources/CArgon2/module.modulemap -Xcc -fmodule-map-file=Sources/CLibCrypto/module.modulemap \
		-target $$(uname -m)-unknown-linux-gnu -minimum-access-level public -output-dir $(DOCS_SYMBOLS)/kit
	docc convert Sources/VaultLogKit/VaultLogKit.docc --additional-symbol-graph-dir $(DOCS_SYMBOLS)/kit \
		--fallback-display-name VaultLogKit --fallback-bundle-identifier org.vaultlog.VaultLogKit \
		--output-path .build/docs/VaultLogKit.doccarchive --warnings-as-errors

# What an app that embeds only the library resolves: Examples/EmbeddingApp depends on the
# OfflineSync, BitwardenAPI and VaultModel products with the "Tools" trait off. Resolving it
# (no build) must not fetch SwiftNIO, Hummingbird, AsyncHTTPClient or argument-parser.
GRAPH_SCRATCH := .build/graph
TOOL_PACKAGES := swift-nio hummingbird async-http-client swift-argument-parser
graph:
	@rm -rf $(GRAPH_SCRATCH) && mkdir -p $(GRAPH_SCRATCH)
	@$(SWIFT) package --package-path Examples/EmbeddingApp --scratch-path $(GRAPH_SCRATCH) resolve >$(GRAPH_SCRATCH).log 2>&1 \
		|| { cat $(GRAPH_SCRATCH).log >&2; exit 1; }
	@packages=$$(ls $(GRAPH_SCRATCH)/checkouts | sort); \
	echo "an app using the library products (traits: []) resolves $$(echo $$packages | wc -w) package(s): $$(echo $$packages)"; \
	for tool in $(TOOL_PACKAGES); do \
		if echo "$$packages" | grep -qx "$$tool"; then echo "error: $$tool is resolved for a library-only app; a tool dependency lost its trait condition in Package.swift" >&2; exit 1; fi; \
	done

# The README's embedding example is Examples/EmbeddingApp (its own package, the library products
# only): built, then run against the emulator started as `vaultlog serve` in another process on a
# free loopback port; it checks with a second client that the server holds its edit.
EXAMPLE_SCRATCH := .build/example
example: build
	@# SwiftPM does not notice a file added to a path dependency (VaultLog itself) when it reuses
	@# the example's build plan; dropping the plan makes it plan again (objects are still reused).
	@rm -f $(EXAMPLE_SCRATCH)/debug.yaml
	$(SWIFT) build --package-path Examples/EmbeddingApp --scratch-path $(EXAMPLE_SCRATCH)
	@$(HOUSE_RULES) warnings $(EXAMPLE_SCRATCH)
	@bin=$$($(SWIFT) build --show-bin-path); work=$$(mktemp -d); \
	VAULTLOG_PASSWORD=example-password $$bin/vaultlog serve --port 0 --account app@example.com --kdf pbkdf2 --iterations 5000 \
		>$$work/serve.log 2>&1 & server=$$!; \
	trap 'kill $$server 2>/dev/null; rm -rf $$work' EXIT; \
	for i in $$(seq 300); do \
		url=$$(sed -n 's/^Bitwarden emulator .* listening on //p' $$work/serve.log); [ -n "$$url" ] && break; sleep 0.1; \
	done; \
	[ -n "$$url" ] || { cat $$work/serve.log >&2; echo "error: the emulator did not start" >&2; exit 1; }; \
	echo "running Examples/EmbeddingApp against $$url"; \
	VAULTLOG_PASSWORD=example-password $(EXAMPLE_SCRATCH)/debug/EmbeddingApp "$$url" app@example.com $$work/store
	@# An app cannot bypass the resolver: a raw append must not type-check against the modules the
	@# app builds (the raw writes are behind @_spi(Tools)), and must fail for exactly that reason.
	@if swiftc -typecheck -I $(EXAMPLE_SCRATCH)/debug/Modules $(MODULE_MAPS) Examples/EmbeddingApp/Misuse/RawAppend.swift \
		>$(EXAMPLE_SCRATCH)/misuse.log 2>&1; then \
		echo "error: an app can call VaultLogStore.append (Examples/EmbeddingApp/Misuse/RawAppend.swift compiled)" >&2; exit 1; fi
	@grep -q "'append' is inaccessible due to '@_spi' protection level" $(EXAMPLE_SCRATCH)/misuse.log || \
		{ cat $(EXAMPLE_SCRATCH)/misuse.log >&2; echo "error: RawAppend.swift failed for another reason than the tools' SPI" >&2; exit 1; }
	@echo "an app cannot append raw events: Examples/EmbeddingApp/Misuse/RawAppend.swift is refused ('append' is behind @_spi(Tools))"

# The whole test suite (Swift Testing), debug build. Tests run one at a time: dozens of
# emulators, HTTP clients and child processes at once on two cores starve each other into
# time-outs, and serial is barely slower (about a minute). The kill tests and the simulation
# run in processes of their own.
house-rules:
	@$(HOUSE_RULES) sources

test: deps house-rules
	$(SWIFT) build --build-tests $(IMPORT_CHECK)
	@$(HOUSE_RULES) warnings $$($(SWIFT) build --show-bin-path)
	$(MAKE) --no-print-directory docs
	$(MAKE) --no-print-directory graph
	$(MAKE) --no-print-directory example
	$(SWIFT) test --skip-build --no-parallel --skip WriterKillTests --skip ResolverKillTests --skip CompactionKillTests --skip SimulationTests
	$(SWIFT) test --skip-build --filter WriterKillTests
	$(SWIFT) test --skip-build --filter ResolverKillTests
	$(SWIFT) test --skip-build --filter CompactionKillTests
	$(SWIFT) test --skip-build --filter SimulationTests

# The long reliability runs (make test runs 100 writer kills, 60 resolver kills, 40 compaction
# kills, 500 seeds): 1,000 SIGKILLs of the writer and of the resolver, 400 of compaction, 60
# rounds of a compaction racing another process's writer, 10,000 simulation seeds and 2,000 of
# the concurrent mode (calls at once, saves during a run, stale views, another device's
# name-preserving changes, cold starts), then each fuzz target; ends with a summary of the figures. Logs in .build-torture/. The seeds run on a
# release build of vaultlog (it also catches release-only faults), one per core. About an hour
# here from a clean checkout; KILLS, RESOLVER_KILLS, SEEDS, CONCURRENT_SEEDS, FUZZ_SECONDS scale it.
TORTURE_LOGS := .build-torture
torture: deps
	$(SWIFT) build --build-tests $(IMPORT_CHECK)
	$(SWIFT) build -c release --product vaultlog
	@mkdir -p $(TORTURE_LOGS)
	VAULTLOG_KILLS=$${KILLS:-1000} $(SWIFT) test --skip-build --filter WriterKillTests 2>&1 | tee $(TORTURE_LOGS)/writer-kills.log
	VAULTLOG_RESOLVER_KILLS=$${RESOLVER_KILLS:-1000} $(SWIFT) test --skip-build --filter ResolverKillTests 2>&1 | tee $(TORTURE_LOGS)/resolver-kills.log
	VAULTLOG_COMPACT_KILLS=$${COMPACT_KILLS:-400} $(SWIFT) test --skip-build --filter CompactionKillTests 2>&1 | tee $(TORTURE_LOGS)/compaction-kills.log
	VAULTLOG_TWO_PROCESS_ROUNDS=$${TWO_PROCESS_ROUNDS:-60} $(SWIFT) test --skip-build --filter TwoProcessTests 2>&1 | tee $(TORTURE_LOGS)/two-process.log
	$$($(SWIFT) build -c release --show-bin-path)/vaultlog simulate --seeds 1..$${SEEDS:-10000} 2>&1 | tee $(TORTURE_LOGS)/simulation.log
	$$($(SWIFT) build -c release --show-bin-path)/vaultlog simulate --concurrent --seeds 1..$${CONCURRENT_SEEDS:-2000} 2>&1 | tee $(TORTURE_LOGS)/simulation-concurrent.log
	$(MAKE) --no-print-directory fuzz 2>&1 | tee $(TORTURE_LOGS)/fuzz.log
	@echo "== torture summary"
	@grep -h "^kill test:" $(TORTURE_LOGS)/writer-kills.log
	@grep -h "^resolver kill test:" $(TORTURE_LOGS)/resolver-kills.log
	@grep -h "^compaction kills:" $(TORTURE_LOGS)/compaction-kills.log
	@grep -h "^two-process compaction race:" $(TORTURE_LOGS)/two-process.log
	@echo "simulation: $$(tail -1 $(TORTURE_LOGS)/simulation.log)"
	@echo "concurrent simulation: $$(tail -1 $(TORTURE_LOGS)/simulation-concurrent.log)"
	@grep -h "^fuzz total" $(TORTURE_LOGS)/fuzz.log

# The Bitwarden-compatible emulator on loopback with a demo account (Ctrl-C stops it).
# PORT=0 picks a free port; FLAVOR=vaultwarden imitates Vaultwarden; KDF=argon2id makes the
# account an Argon2id one; ADMIN_TOKEN enables /admin. The password and the token reach the
# emulator through its environment (VAULTLOG_PASSWORD, VAULTLOG_ADMIN_TOKEN), never its argv.
serve: deps
	VAULTLOG_PASSWORD="$${PASSWORD:-demo-password}" $${ADMIN_TOKEN:+VAULTLOG_ADMIN_TOKEN="$$ADMIN_TOKEN"} \
		$(SWIFT) run vaultlog serve --port $${PORT:-8087} --flavor $${FLAVOR:-bitwarden} \
		--account $${ACCOUNT:-demo@example.com} --kdf $${KDF:-pbkdf2} \
		$$( [ "$${KDF:-pbkdf2}" = pbkdf2 ] && echo --iterations $${ITERATIONS:-5000} )

# Benchmarks (Benchmarks/, its own package: GRDB and the rest stay out of the library products).
# Release build; each comparison runs its contenders interleaved in one process run and prints
# one JSON object per figure on stdout (progress on stderr). `make bench` is the full run and
# rewrites Docs/Performance.md and Docs/performance.svg; `make bench-quick` (about 5 minutes
# after the build) writes its report to .build-bench/ instead. BENCH_GROUPS=save,concurrency,append,... picks groups.
BENCH := Benchmarks/.build/release/vaultlog-bench

bench-deps: deps
	@if ! pkg-config --exists sqlite3 || ! command -v openssl >/dev/null; then \
		echo "Installing libsqlite3-dev and openssl (the SQLite contender and the AES/HMAC floor)..." >&2; \
		$(SUDO) apt-get update -qq >&2 && $(SUDO) apt-get install -y -qq libsqlite3-dev openssl >&2; \
	fi

# Build output goes to stderr: stdout of bench and bench-quick is only the JSON lines.
bench-build: bench-deps
	@rm -f Benchmarks/.build/release.yaml   # SwiftPM keeps a stale plan for the path dependency (new files unbuilt)
	@cd Benchmarks && $(SWIFT) build -c release --product vaultlog-bench >&2
	@cd Benchmarks && $(SWIFT) build -c release --product vaultlog >&2   # the resolver group's separate server
	@$(HOUSE_RULES) warnings Benchmarks/.build >&2

bench: bench-build
	@$(BENCH) suite $${BENCH_GROUPS:+--groups $$BENCH_GROUPS} --report Docs/Performance.md --analysis Benchmarks/analysis.md --command "make bench"

bench-quick: bench-build
	@mkdir -p .build-bench
	@$(BENCH) suite --quick $${BENCH_GROUPS:+--groups $$BENCH_GROUPS} --report .build-bench/Performance-quick.md --analysis Benchmarks/analysis.md --command "make bench-quick"

# Event-log throughput alone (1M events by default; EVENTS=N to change).
bench-log: bench-build
	$(BENCH) log --events $${EVENTS:-1000000}

# libFuzzer on the parsers (EncString, envelopes, scenarios, exports, emulator requests), each
# for FUZZ_SECONDS (default 30); Tests/Fuzz is its own package and build (Docs/Reliability.md).
fuzz: deps
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) SWIFT=$(SWIFT) Tests/Fuzz/fuzz.sh
