#!/usr/bin/env bash
# package_deb (ctest): builds the Debian package with CPack from a configured, built tree, checks
# its control data and contents, verifies the systemd unit, unpacks it into a temporary root and
# runs the packaged binary from there with the packaged default configuration.
#
#   bash packaging/test_package.sh <build-dir>
#
# Needs dpkg-deb, dpkg-shlibdeps (dpkg-dev), systemd-analyze (systemd) and sqlite3, which
# scripts/install-deps.sh installs. The unit's Type=notify handshake is tested by
# tests/e2e/systemd_notify_e2e_test.cc. Prints "N passed, 0 failed" and exits 0 when every check holds.
set -uo pipefail

build=$(cd "${1:?usage: test_package.sh <build-dir>}" && pwd)
work=$(mktemp -d /tmp/qb_package_test.XXXXXX)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
check() {  # check "what" command...
  local what=$1
  shift
  if "$@" >"$work/check.out" 2>&1; then
    passed=$((passed + 1))
    echo "ok: $what"
  else
    failed=$((failed + 1))
    echo "FAILED: $what"
    sed 's/^/    /' "$work/check.out" | head -40
  fi
}
has() { grep -qE -- "$2" "$1"; }           # has FILE REGEX
lacks() { ! grep -qE -- "$2" "$1"; }       # lacks FILE REGEX

# 1. Build the package into the temporary folder (the tree is already built: ctest runs after the
#    build; CPack's preinstall step only checks that it is up to date).
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" >"$work/cpack.log" 2>&1; then
  echo "FAILED: cpack"
  cat "$work/cpack.log"
  echo "0 passed, 1 failed"
  exit 1
fi
deb=$(ls "$work"/out/queuebox_*.deb 2>/dev/null | head -1)
check "cpack made queuebox_<version>_<arch>.deb" test -f "$deb"
if [ -z "$deb" ]; then
  cat "$work/cpack.log"
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
fi
echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# 2. Control data: name, dependencies found by dpkg-shlibdeps, maintainer scripts, conffiles.
dpkg-deb -I "$deb" >"$work/info"
dpkg-deb -f "$deb" Depends >"$work/depends"
check "Package: queuebox" has "$work/info" '^ Package: queuebox$'
check "Depends names the shared libraries (libpq, sqlite) and adduser" \
  bash -c "grep -q 'libpq5' '$work/depends' && grep -q 'libsqlite3-0' '$work/depends' &&
           grep -q 'adduser' '$work/depends'"
check "maintainer scripts postinst, prerm, postrm are executable" \
  bash -c "dpkg-deb -I '$deb' | grep -E '^ +[0-9]+ bytes, +[0-9]+ lines +\\* +(postinst|prerm|postrm) ' | wc -l | grep -qx 3"
mkdir -p "$work/control"
dpkg-deb -e "$deb" "$work/control"
check "conffiles lists /etc/queuebox/queuebox.yml" has "$work/control/conffiles" '^/etc/queuebox/queuebox.yml$'
check "postinst creates the queuebox system user" has "$work/control/postinst" 'adduser --system --group'
check "maintainer scripts pass sh -n" bash -c "for s in postinst prerm postrm; do sh -n '$work/control/'\$s || exit 1; done"

# 3. Contents.
dpkg-deb -c "$deb" >"$work/contents"
check "contents: the binary /usr/bin/queuebox (0755)" has "$work/contents" '^-rwxr-xr-x .* \./usr/bin/queuebox$'
check "contents: the JSONata engine module /usr/lib/queuebox/libqueuebox_jsonata.so" \
  has "$work/contents" ' \./usr/lib/queuebox/libqueuebox_jsonata\.so$'
check "contents: the config /etc/queuebox/queuebox.yml" has "$work/contents" ' \./etc/queuebox/queuebox\.yml$'
check "contents: the unit /lib/systemd/system/queuebox.service" has "$work/contents" ' \./lib/systemd/system/queuebox\.service$'
check "contents: the docs under /usr/share/doc/queuebox" has "$work/contents" ' \./usr/share/doc/queuebox/operations\.md$'
check "contents: nothing outside /usr, /etc, /lib" lacks "$work/contents" ' \./(opt|var|home|tmp|usr/local)/'

# 4. Unpack into a temporary root.
root="$work/root"
dpkg-deb -x "$deb" "$root"
bin="$root/usr/bin/queuebox"
unit="$root/lib/systemd/system/queuebox.service"
conf="$root/etc/queuebox/queuebox.yml"

# 5. The unit: hardened as documented, and systemd-analyze verify. This container runs no systemd
#    as PID 1; verify needs none, but it resolves ExecStart= against the file system, so it runs
#    with --root on the unpacked tree (the binary is at /usr/bin/queuebox there); --man=no
#    because Documentation= is a file, not a man page. verify exits 0 on an unknown directive
#    (it only warns), so any line naming our unit counts as a failure.
for directive in 'Type=notify' 'User=queuebox' 'ProtectSystem=strict' \
  'ReadWritePaths=/var/lib/queuebox' 'NoNewPrivileges=yes' 'Restart=on-failure' \
  'ExecStart=/usr/bin/queuebox --config /etc/queuebox/queuebox.yml run'; do
  check "unit sets $directive" grep -qxF "$directive" "$unit"
done
# The root also needs the units ours depends on by default (sysinit.target, ...): the host's.
mkdir -p "$root/etc/systemd/system" "$root/var/lib/queuebox"
cp -an /lib/systemd/system/. "$root/lib/systemd/system/"
check "systemd-analyze verify queuebox.service" bash -c "
  out=\$(systemd-analyze verify --man=no --root='$root' /lib/systemd/system/queuebox.service 2>&1)
  rc=\$?
  echo \"\$out\"
  # Lines about queuebox.service are findings about our unit; anything else (the host's own
  # units, seen through the root) is not ours to judge.
  [ \$rc -eq 0 ] && ! echo \"\$out\" | grep -q 'queuebox.service'"

check "systemd-analyze security: exposure at most 2.0 (of 10)" \
  systemd-analyze security --offline=yes --threshold=20 --root="$root" \
  /lib/systemd/system/queuebox.service

# 6. Run the packaged binary from the unpacked root.
check "queuebox --version" bash -c "'$bin' --version | grep -q '[0-9]\\.[0-9]'"
check "check-config accepts the packaged default unchanged" "$bin" --config "$conf" check-config
# SpiderMonkey is the module's alone: the binary loads it from ../lib/queuebox only for a transform.
check "the binary does not link libmozjs; the module does" bash -c "
  ! readelf -d '$bin' | grep -q 'libmozjs' &&
  readelf -d '$root/usr/lib/queuebox/libqueuebox_jsonata.so' | grep -q 'NEEDED.*libmozjs'"
check "Depends names SpiderMonkey (libmozjs-102-0), which the module links" \
  grep -q 'libmozjs-102' "$work/depends"
mkdir -p "$work/transform"
cat >"$work/transform/queuebox.yml" <<YAML
database: {type: sqlite, url: "$work/transform/outbox.db"}
routes: [{topicPattern: "**", destination: out, transform: {expression: '{"n": n}'}}]
destinations: {out: {type: file, path: "$work/transform/out.jsonl"}}
YAML
check "check-config compiles a transform with the packaged module" \
  "$bin" --config "$work/transform/queuebox.yml" check-config
check "the packaged default is the embedded SQLite outbox under /var/lib/queuebox" \
  bash -c "'$bin' --config '$conf' check-config | grep -q '/var/lib/queuebox/outbox.db'"

# run --until-idle on a temporary SQLite file: the packaged file as it is, the state path and a
# route to a file destination given by QUEUEBOX_* variables (as /etc/default/queuebox would).
free_port() {  # a loopback port nothing listens on (a refused connect)
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  return 1
}
port=$(free_port)
export QUEUEBOX_DATABASE_URL="$work/state/outbox.db" QUEUEBOX_SERVER_HTTPPORT="$port" \
  QUEUEBOX_SERVER_ADDRESS=127.0.0.1 \
  QUEUEBOX_ROUTES_0_TOPICPATTERN='order.*' QUEUEBOX_ROUTES_0_DESTINATION=out \
  QUEUEBOX_DESTINATIONS_OUT_TYPE=file QUEUEBOX_DESTINATIONS_OUT_PATH="$work/state/delivered.jsonl"
mkdir -p "$work/state"
check "migrate creates the outbox" "$bin" --config "$conf" migrate
sqlite3 "$work/state/outbox.db" \
  "INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'cust-42', '{\"orderId\":\"1111\"}');
   INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'cust-42', '{\"orderId\":\"1112\"}');"
check "run --until-idle delivers and exits 0" "$bin" --config "$conf" run --until-idle
check "both rows were delivered in key order" bash -c "
  [ \$(wc -l < '$work/state/delivered.jsonl') -eq 2 ] &&
  head -1 '$work/state/delivered.jsonl' | grep -q 1111 && tail -1 '$work/state/delivered.jsonl' | grep -q 1112"
check "both rows are sent" bash -c "
  [ \"\$(sqlite3 '$work/state/outbox.db' \"SELECT group_concat(state) FROM outbox\")\" = 'sent,sent' ]"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
