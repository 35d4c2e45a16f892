#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the test servers need.
# Idempotent: does nothing when all are installed. Never upgrades what the machine has.
set -euo pipefail
PKGS=(
  g++ cmake ninja-build pkg-config ccache git ca-certificates curl procps
  dpkg-dev systemd
  libpq-dev libsqlite3-dev sqlite3 uuid-dev libssl-dev
  librdkafka-dev librabbitmq-dev libnats-dev libcurl4-openssl-dev
  libcpp-httplib-dev prometheus-cpp-dev nlohmann-json3-dev libyaml-cpp-dev
  libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  postgresql postgresql-contrib rabbitmq-server nats-server amqp-tools
)
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
