#!/usr/bin/env bash
# Builds the container image of QueueBox C++ and writes it as an archive that `podman load -i`
# and `docker load -i` accept, tagged queuebox-cpp:<version> and queuebox-cpp:latest. Nothing is
# pulled from a registry: the root filesystem is the built binary and its JSONata module plus
# exactly the Debian runtime libraries they load (their ldd closure, each file mapped to its
# package with dpkg -S), CA certificates, tzdata and a passwd/group with the user queuebox (10001).
#
#   bash packaging/image/build.sh [OUT]      # default build/queuebox-image.tar
#
# Environment: QB_BUILD_DIR (default build; configured and built as CI does when needed),
# QB_IMAGE_BINARY + QB_IMAGE_MODULE (use these files and build nothing), SOURCE_DATE_EPOCH
# (default: the last commit's time; same inputs and epoch give the same archive).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${1:-build/queuebox-image.tar}
BUILD_DIR=${QB_BUILD_DIR:-build}
IMAGE_NAME=${QB_IMAGE_NAME:-queuebox-cpp}

if [ -n "${QB_IMAGE_BINARY:-}" ] && [ -n "${QB_IMAGE_MODULE:-}" ]; then
  BINARY=$QB_IMAGE_BINARY
  MODULE=$QB_IMAGE_MODULE
else
  bash scripts/install-deps.sh
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
      -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j "${QB_IMAGE_JOBS:-2}" --target queuebox queuebox_jsonata
  BINARY=$BUILD_DIR/apps/queuebox/queuebox
  MODULE=$BUILD_DIR/src/transform/libqueuebox_jsonata.so
fi
for f in "$BINARY" "$MODULE"; do
  [ -f "$f" ] || { echo "build.sh: $f is missing" >&2; exit 1; }
done
for tool in python3 dpkg-query ldd strip; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is needed" >&2; exit 1; }
done
VERSION=$("$BINARY" --version | awk '{print $2}')
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || echo 0)
fi
export LC_ALL=C

ROOT=$(mktemp -d)        # the root filesystem
PACKAGES=$(mktemp)       # the Debian packages its files come from
CONFIG=$(mktemp)         # the container configuration
trap 'rm -rf "$ROOT" "$PACKAGES" "$CONFIG"' EXIT
mkdir -p "$ROOT"/usr/{bin,lib,lib64,share/doc/queuebox} "$ROOT"/etc/{queuebox,ssl/certs} \
  "$ROOT"/tmp "$ROOT"/var/lib/queuebox/capture "$ROOT"/usr/lib/ssl
for d in bin lib lib64; do ln -s "usr/$d" "$ROOT/$d"; done  # Debian 12's merged /usr

# The program, stripped (the build keeps its symbols for the tests and benchmarks).
strip --strip-unneeded -o "$ROOT/usr/bin/queuebox" "$BINARY"
mkdir -p "$ROOT/usr/lib/queuebox"
strip --strip-unneeded -o "$ROOT/usr/lib/queuebox/libqueuebox_jsonata.so" "$MODULE"
chmod 0644 "$ROOT/usr/lib/queuebox/libqueuebox_jsonata.so"

# The shared libraries both load, at their merged-/usr path, and the packages they come from.
ldd "$BINARY" "$MODULE" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && NF > 1 {print $1}' |
  sort -u | while read -r lib; do
  real_dir=$(readlink -f "$(dirname "$lib")")
  mkdir -p "$ROOT$real_dir"
  cp -L "$lib" "$ROOT$real_dir/$(basename "$lib")"
  # dpkg's database names the unmerged path (/lib/...) of most libraries: ask for both.
  pkg=$( (dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null) | head -1)
  [ -n "$pkg" ] || { echo "build.sh: no Debian package owns $lib" >&2; exit 1; }
  echo "${pkg%%:*}" >>"$PACKAGES"
done
echo ca-certificates >>"$PACKAGES"
echo tzdata >>"$PACKAGES"

# CA certificates: Debian's bundle, made from the package's own files (not the host's
# /etc/ssl/certs, which may hold local additions), where libcurl and OpenSSL look for it.
dpkg -L ca-certificates | grep '\.crt$' | sort | xargs cat >"$ROOT/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/ssl/certs "$ROOT/usr/lib/ssl/certs"
ln -s /etc/ssl/certs/ca-certificates.crt "$ROOT/usr/lib/ssl/cert.pem"

# tzdata: the zone files as the package installs them (links kept); UTC by default.
dpkg -L tzdata | grep '^/usr/share/zoneinfo/' | sed 's|^/||' | sort |
  tar -C / --no-recursion --hard-dereference --verbatim-files-from -T - -cf - | tar -C "$ROOT" -xf -
ln -s /usr/share/zoneinfo/Etc/UTC "$ROOT/etc/localtime"

# Users, name lookups.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nqueuebox:x:10001:10001:QueueBox:/var/lib/queuebox:/usr/sbin/nologin\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\nqueuebox:x:10001:\n' >"$ROOT/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$ROOT/etc/nsswitch.conf"

# Licences of every package the image holds, and the list with versions.
sort -u "$PACKAGES" | while read -r pkg; do
  copyright=/usr/share/doc/$pkg/copyright
  [ -f "$copyright" ] && install -D -m 0644 "$copyright" "$ROOT$copyright"
  dpkg-query -W -f='${Package} ${Version}\n' "$pkg"
done >"$ROOT/usr/share/doc/queuebox/image-packages.txt"
cp "$REPO/README.md" "$ROOT/usr/share/doc/queuebox/"

# The container configuration (docs/compatibility.md: QueueBox's image, run the same way).
cat >"$CONFIG" <<JSON
{
  "User": "10001:10001",
  "Entrypoint": ["queuebox"],
  "Cmd": ["run"],
  "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "QUEUEBOX_CPP_LOG_STREAM=stdout"],
  "WorkingDir": "/var/lib/queuebox",
  "ExposedPorts": {"8080/tcp": {}},
  "Volumes": {"/var/lib/queuebox": {}},
  "StopSignal": "SIGTERM",
  "Healthcheck": {"Test": ["CMD", "queuebox", "probe"], "Interval": 10000000000,
                  "Timeout": 5000000000, "StartPeriod": 30000000000, "Retries": 3},
  "Labels": {"org.opencontainers.image.title": "queuebox-cpp",
             "org.opencontainers.image.description": "QueueBox C++: a transactional outbox relay",
             "org.opencontainers.image.version": "$VERSION",
             "org.opencontainers.image.licenses": "see /usr/share/doc/*/copyright"}
}
JSON

mkdir -p "$(dirname "$OUT")"
python3 "$REPO/packaging/image/mkarchive.py" --rootfs "$ROOT" --out "$OUT" \
  --created "$SOURCE_DATE_EPOCH" --tag "$IMAGE_NAME:$VERSION" --tag "$IMAGE_NAME:latest" \
  --owner var/lib/queuebox=10001:10001 --owner var/lib/queuebox/capture=10001:10001 \
  --mode tmp=1777 --mode var/lib/queuebox=0750 --mode var/lib/queuebox/capture=0700 \
  --config-json "$CONFIG"
echo "build.sh: wrote $OUT ($IMAGE_NAME:$VERSION, $IMAGE_NAME:latest), $(du -m "$OUT" | cut -f1) MB"
