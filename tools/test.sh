#!/usr/bin/env bash
# Installs what is missing, builds everything (the tests run the built `eventlog`), runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install-deps.sh
swift build --build-tests
swift test --skip-build "$@"
