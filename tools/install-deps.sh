#!/usr/bin/env bash
# Installs the C libraries and tools the package needs on Debian, when they are missing:
# liblmdb-dev (storage), lmdb-utils (mdb_stat, used by a test), libsqlite3-dev (benchmark peer),
# libssl-dev (SHA-256 for deploys), libcurl4-openssl-dev (the HTTP transport of deploys and lookups), curl (the update server's self-test), python3 (the loopback servers the tests start),
# libnats-dev (the fleet's NATS client), nats-server (the JetStream servers the fleet tests start) and
# chromium (the headless browser the tests of 'eventlog view' load its page in).
set -euo pipefail
needed=()
for package in liblmdb-dev lmdb-utils libsqlite3-dev libssl-dev pkg-config libcurl4-openssl-dev curl python3 libnats-dev nats-server chromium; do
  dpkg -s "$package" >/dev/null 2>&1 || needed+=("$package")
done
if [ ${#needed[@]} -gt 0 ]; then
  echo "installing ${needed[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${needed[@]}" >/dev/null
fi
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null 2>&1 || { echo "error: swift is not on PATH (expected /opt/swift/usr/bin)" >&2; exit 1; }
