#!/usr/bin/env bash
# Fuzzes the decoders and parsers with libFuzzer: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Builds eventlog-fuzz (Tests/EventLogFuzz) with libFuzzer and AddressSanitizer, then runs each
# target (all by default) for SECONDS_PER_TARGET (default 60) over a copy of its seed corpus
# Tests/EventLogFuzz/Corpus/TARGET, so that the committed seeds stay as they are and the inputs
# it finds are left in a temporary directory. Prints a line per target with its executions,
# seconds and crashes; exits 1 when a target crashed, naming the input that did it (replay it
# with `eventlog-fuzz TARGET FILE` from a plain build, and make it a test in
# Tests/EventLogTests/FuzzRegressionTests.swift).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install-deps.sh

seconds=${1:-60}
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(record json path predicate router capture import manifest version)

# A scratch path of its own, so that the sanitizer flags do not rebuild the main build's modules.
scratch=.build/fuzz
mkdir -p "$scratch"
echo "building eventlog-fuzz with -sanitize=fuzzer,address (log: $scratch/build.log)"
if ! swift build -c release --scratch-path "$scratch" --product eventlog-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING >"$scratch/build.log" 2>&1; then
  grep -v "Cannot export local symbol" "$scratch/build.log" | tail -20 >&2 # ld.gold's notes on ASan's symbols
  exit 2
fi
fuzzer=$scratch/release/eventlog-fuzz

work=$(mktemp -d "${TMPDIR:-/tmp}/eventlog-fuzz.XXXXXX")
crashed=0
for target in "${targets[@]}"; do
  seeds=Tests/EventLogFuzz/Corpus/$target
  [ -d "$seeds" ] || { echo "no seed corpus $seeds" >&2; exit 2; }
  dir=$work/$target
  mkdir -p "$dir"
  cp -R "$seeds" "$dir/corpus"
  start=$(date +%s)
  # libFuzzer stops at the first crash, leak, timeout or out-of-memory, and writes the input.
  status=0
  EVENTLOG_FUZZ_TARGET=$target "$fuzzer" "$dir/corpus" -max_total_time="$seconds" -max_len=4096 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" >"$dir/log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
  if [ -z "$runs" ]; then runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$dir/log" | tail -1); fi
  time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$dir/log")
  artifacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \))
  crashes=$(printf '%s' "$artifacts" | grep -c . || true)
  line=$(printf '%-10s %10s executions in %3s s, %s crashes' "$target" "${runs:-?}" "${time:-$(($(date +%s) - start))}" "$crashes")
  if [ "$crashes" -gt 0 ]; then
    crashed=1
    echo "$line: $artifacts (log: $dir/log)"
  elif [ "$status" -ne 0 ]; then
    crashed=1
    echo "$line; libFuzzer failed with status $status (log: $dir/log)"
  else
    echo "$line"
  fi
done
echo "corpora with the new inputs: $work"
exit "$crashed"
