#!/usr/bin/env bash
# scripts/install-deps.sh: install everything dblog needs to build and test on Debian 12.
# Idempotent; run as root (or with sudo available). Used by .ci/run and the README quick start.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  postgresql-15 postgresql-server-dev-15 postgresql-contrib libpq-dev
  protobuf-compiler libprotobuf-dev python3-protobuf
  libboost-dev libboost-program-options-dev
  libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  # tests/fuzz (tests/run.sh runs a short pass): clang 14 and its runtime libraries, which hold
  # libFuzzer and the ASan/UBSan runtimes (libclang_rt.fuzzer-x86_64.a and friends).
  clang libclang-rt-14-dev
  python3
  curl
  # dblog publish (client/publish/): the NATS C client and Kafka's librdkafka to build, and
  # nats-server (in /usr/sbin) for the tests and docs/publish.md's example, which start their own
  nats-server libnats-dev librdkafka-dev
  # dblogd's status page (GET /status): its browser test loads it in headless Chromium
  # (StatusPageTest, tests/cpp/sidecar/status_page_test.cc), with a font to render its text
  chromium fonts-dejavu-core
  # dblog publish --format debezium-avro: its tests decode the records with Apache Avro's own
  # Python library (tests/cpp/publish/avro_check.py)
  python3-avro
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # The postgresql package creates and starts a default cluster; tests never use it.
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi

# PostgreSQL 16, 17 and 18 server binaries for the pgoutput tests (npm; Debian 12 has only 15).
"$(dirname "$0")/fetch-postgres.sh"
