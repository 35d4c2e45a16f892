#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs the packages, starts PostgreSQL,
# RabbitMQ and NATS on loopback, builds, and runs every ctest test (unit, contract,
# integration, e2e). Extra arguments go to ctest (e.g. -L unit, -R relay).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/services.sh start
eval "$(bash scripts/services.sh env)"
BUILD_DIR=${BUILD_DIR:-build}
# Release: the tests run against the binary as it ships (-O3, warnings still errors). A unity
# build (docs/testing.md, "Build time"): QB_UNITY_BUILD=OFF for a build dir edited incrementally.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_UNITY_BUILD="${QB_UNITY_BUILD:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j 2 "$@"
