#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the test servers need.
# Idempotent: does nothing when all are installed. Never upgrades what the machine has.
set -euo pipefail
PKGS=(
  g++ cmake ninja-build pkg-config ccache git ca-certificates curl procps
  dpkg-dev systemd
  libpq-dev libsqlite3-dev sqlite3 uuid-dev libssl-dev
  librdkafka-dev librabbitmq-dev libnats-dev libcurl4-openssl-dev
  libcpp-httplib-dev prometheus-cpp-dev nlohmann-json3-dev libsimdjson-dev libyaml-cpp-dev
  libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  postgresql postgresql-contrib rabbitmq-server nats-server amqp-tools
  libmozjs-102-dev
  clang-14 libclang-rt-14-dev
  podman runc python3 tzdata  # the container image (packaging/image) and its test
  chromium chromium-driver python3-selenium  # the console's browser test (docs/console.md)
)
# Node and npm fetch and rewrite the JSONata package at build time and run its differential test
# (src/transform). A machine's own Node (which may come from outside Debian and bring npm with
# it) is kept; only a machine without them gets Debian's.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
if dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null | grep -qv 'install ok installed' ||
   [ "$(dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null | wc -l)" -ne "${#PKGS[@]}" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends --no-upgrade "${PKGS[@]}"
else
  echo "install-deps: all ${#PKGS[@]} packages already installed"
fi
