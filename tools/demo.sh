#!/usr/bin/env bash
# The main job, on a fresh Debian machine: installs what is missing, builds `eventlog`, records
# a botmessages session on the default database (./eventlog.lmdb), then shows it, replays it,
# and finds a planted regression with replay and bisect.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install-deps.sh
swift build --product eventlog 2>&1 | grep -v '^\[' >&2 || true
eventlog() { .build/debug/eventlog "$@"; }
step() { printf '\n\033[1m$ eventlog %s\033[0m\n' "$*"; eventlog "$@" || true; }

step demo --force
step info
step open 'botmessages://avatar/aria-7/expanded' --origin tap
printf '\n\033[1m$ eventlog log | tail -n 12\033[0m\n'; eventlog log | tail -n 12
step diff 20 40
step snapshot --path messenger
step verify
step replay --verify | tail -n 1
step replay --verify --regression compound-tab-filter
step demo --force --regression compound-tab-filter --db ./faulty.lmdb
step bisect --where 'messenger.selectedTab == "bots" && messenger.listFilter == null' --db ./faulty.lmdb
step bisect --against ./eventlog.lmdb --db ./faulty.lmdb
step shrink --replay --regression compound-tab-filter --db ./faulty.lmdb
step replay --what-if maxDeclines=3
step bisect --where 'deploy.phase == "rolledBack"'
printf '\nThe binary is .build/debug/eventlog; try: export PATH="$PWD/.build/debug:$PATH"; eventlog --help\n'
