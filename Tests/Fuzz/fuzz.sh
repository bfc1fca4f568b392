#!/usr/bin/env bash
# Builds the libFuzzer targets of Tests/Fuzz and runs each for FUZZ_SECONDS (default 30), then
# prints one summary line per target and a total:
#
#   fuzz: FuzzEncString execs=123456 crashes=0
#   fuzz total: execs=654321 crashes=0
#
# Each run starts from the committed seeds (Tests/Fuzz/Corpus/TARGET, read only) and writes the
# inputs it discovers to a temporary directory, deleted afterwards. A crash (or a hang longer
# than FUZZ_TIMEOUT seconds) stops that target, keeps the input under FUZZ_CRASHES
# (default Tests/Fuzz/Crashes/TARGET/), prints how to reproduce it, and makes the script exit 1.
#
# Environment: FUZZ_SECONDS, FUZZ_TARGETS (space-separated subset), FUZZ_TIMEOUT (default 10),
# FUZZ_CRASHES, SWIFT.
set -uo pipefail

cd "$(dirname "$0")"
FUZZ_DIR=$(pwd)
REPO_DIR=$(cd ../.. && pwd)
SWIFT=${SWIFT:-swift}
SECONDS_EACH=${FUZZ_SECONDS:-30}
TIMEOUT=${FUZZ_TIMEOUT:-10}
CRASHES=${FUZZ_CRASHES:-$FUZZ_DIR/Crashes}
TARGETS=${FUZZ_TARGETS:-FuzzEncString FuzzEnvelope FuzzScenario FuzzRecordedLog FuzzEmulatorRequest}
SCRATCH=$FUZZ_DIR/.build-fuzz

# SwiftPM names a package after its directory: this one is "fuzz", and so would be the main
# package if the checkout itself is called fuzz; the two then collide and nothing resolves.
if [ "$(basename "$REPO_DIR" | tr '[:upper:]' '[:lower:]')" = fuzz ]; then
    echo "fuzz: the checkout directory is named '$(basename "$REPO_DIR")', which SwiftPM confuses with Tests/Fuzz;" >&2
    echo "fuzz: run from a checkout (or a bind mount of it) with another name" >&2
    exit 2
fi

# -sanitize=fuzzer instruments every Swift module of the build (VaultLog's parsers included)
# for coverage and links libFuzzer; address adds AddressSanitizer, which catches the
# out-of-bounds reads of unsafe-buffer parsing that -O builds do not bounds-check.
echo "fuzz: building the fuzz targets (release, -sanitize=fuzzer,address)..."
mkdir -p "$SCRATCH"
started=$(date +%s)
if ! "$SWIFT" build -c release --package-path "$FUZZ_DIR" --scratch-path "$SCRATCH" \
        -Xswiftc -sanitize=fuzzer,address > "$SCRATCH/build.log" 2>&1; then
    tail -40 "$SCRATCH/build.log" >&2
    echo "fuzz: build failed (full log: $SCRATCH/build.log)" >&2
    exit 2
fi
echo "fuzz: built in $(( $(date +%s) - started )) s"
BIN=$("$SWIFT" build -c release --package-path "$FUZZ_DIR" --scratch-path "$SCRATCH" --show-bin-path)

# libFuzzer reports crashes itself: the Swift runtime's backtracer would otherwise catch the
# signal first. Leak checking is off: the Swift runtime's caches look like leaks to LSan.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:handle_abort=1}

total_execs=0
total_crashes=0
summary=()
for target in $TARGETS; do
    work=$(mktemp -d "${TMPDIR:-/tmp}/vaultlog-fuzz-$target.XXXXXX")
    artifacts=$CRASHES/$target
    mkdir -p "$artifacts"
    before=$(ls "$artifacts" | wc -l)
    dict=()
    [ -f "$FUZZ_DIR/Dictionaries/$target.dict" ] && dict=(-dict="$FUZZ_DIR/Dictionaries/$target.dict")
    log=$work.log
    "$BIN/$target" "$work" "$FUZZ_DIR/Corpus/$target" "${dict[@]}" \
        -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -detect_leaks=0 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" > "$log" 2>&1
    status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ -z "$execs" ]; then
        # A crash ends the run before the final stats: take the last progress line's count.
        execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    fi
    execs=${execs:-0}
    crashes=$(( $(ls "$artifacts" | wc -l) - before ))
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
    line="fuzz: $target execs=$execs crashes=$crashes"
    echo "$line"
    summary+=("$line")
    if [ "$crashes" -ne 0 ]; then
        grep -E 'Fatal error|ERROR: (libFuzzer|AddressSanitizer)|SUMMARY|Test unit written' "$log" | head -8 | sed 's/^/    /'
        for input in $(ls -t "$artifacts" | head -"$crashes"); do
            echo "    kept: $artifacts/$input"
            echo "    reproduce: SWIFT_BACKTRACE=enable=no $BIN/$target $artifacts/$input"
        done
        echo "    full log: $log"
    else
        rm -f "$log"
    fi
    rm -rf "$work"
    total_execs=$(( total_execs + execs ))
    total_crashes=$(( total_crashes + crashes ))
done

echo "fuzz total: execs=$total_execs crashes=$total_crashes"
[ "$total_crashes" -eq 0 ]
