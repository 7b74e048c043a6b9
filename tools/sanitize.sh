#!/usr/bin/env bash
# Runs the whole suite under ThreadSanitizer and AddressSanitizer, each built apart from the
# plain debug build (.build/tsan, .build/asan), so that both stay clean: any report fails the
# run (TSan-built children exit 66 on a report, which fails the test that ran them).
# Usage: tools/sanitize.sh [thread|address]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install-deps.sh
# Exit-time leaks of a child process are not what this run looks for; every other ASan report is.
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
for sanitizer in "${@:-thread address}"; do
  for one in $sanitizer; do
    scratch=".build/${one:0:1}san"
    echo "== swift test --sanitize=$one (build in $scratch)" >&2
    swift build --build-tests --sanitize="$one" --scratch-path "$scratch"
    # The kill loops run a quarter of their rounds here (killRounds in the tests): the plain run counts kills.
    EVENTLOG_TEST_SANITIZER="$one" swift test --skip-build --sanitize="$one" --scratch-path "$scratch"
  done
done
