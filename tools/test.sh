#!/usr/bin/env bash
# Installs what is missing, checks that every public declaration is documented, builds
# everything (the tests run the built `eventlog`), runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install-deps.sh
python3 tools/check-docs.py
swift build --build-tests
swift test --skip-build "$@"
