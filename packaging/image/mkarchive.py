#!/usr/bin/env python3
"""Writes a container image archive from a root filesystem folder, without a container engine.

The archive is a `docker save` archive (manifest.json naming the config and the layer under
blobs/sha256/, as Docker 25 writes them), which `docker load -i` and `podman load -i` accept with
every tag; the config is an OCI image config. One layer, uncompressed. (An OCI layout beside it,
as Docker 25 adds, makes podman 4.3 load the layout instead: one tag, under docker.io/library/.) Same folder and arguments, same bytes: the tar is sorted, every time is
--created, owners are 0:0 unless --owner names the path, modes are 0755/0644 unless the file
system or --mode say otherwise, and no pax headers (no atime/ctime).

  mkarchive.py --rootfs DIR --out image.tar --created EPOCH --tag name:version [--tag ...]
               [--owner PATH=UID:GID ...] [--mode PATH=OCTAL ...] [--config-json FILE]
"""
import argparse
import datetime
import hashlib
import io
import json
import os
import stat
import sys
import tarfile


def parse_pairs(items, convert):
    out = {}
    for item in items:
        path, _, value = item.partition("=")
        out[path.strip("/")] = convert(value)
    return out


def walk(rootfs):
    """Every path under rootfs, relative, sorted byte-wise (parents before children)."""
    paths = []
    for top, dirs, files in os.walk(rootfs):
        rel = os.path.relpath(top, rootfs)
        for name in dirs + files:
            paths.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(paths, key=lambda p: p.encode())


def tar_info(rootfs, rel, created, owners, modes):
    full = os.path.join(rootfs, rel)
    st = os.lstat(full)
    info = tarfile.TarInfo(rel)
    info.mtime = created
    info.uid, info.gid = owners.get(rel, (0, 0))
    info.uname = info.gname = ""
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(full)
        info.mode = 0o777
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
    elif stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.size = st.st_size
        info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
    else:
        sys.exit(f"mkarchive: {rel}: only folders, files and symlinks go into the image")
    info.mode = modes.get(rel, info.mode)
    return info, full


def write_layer(rootfs, created, owners, modes):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel in walk(rootfs):
            info, full = tar_info(rootfs, rel, created, owners, modes)
            if info.type == tarfile.REGTYPE:
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--created", type=int, required=True, help="SOURCE_DATE_EPOCH")
    ap.add_argument("--tag", action="append", required=True)
    ap.add_argument("--owner", action="append", default=[])
    ap.add_argument("--mode", action="append", default=[])
    ap.add_argument("--config-json", required=True, help="the image's container config")
    args = ap.parse_args()

    owners = parse_pairs(args.owner, lambda v: tuple(int(x) for x in v.split(":")))
    modes = parse_pairs(args.mode, lambda v: int(v, 8))
    created_iso = datetime.datetime.fromtimestamp(args.created, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    layer = write_layer(args.rootfs, args.created, owners, modes)
    with open(args.config_json) as f:
        container_config = json.load(f)
    config = canonical({
        "architecture": "amd64",
        "os": "linux",
        "created": created_iso,
        "config": container_config,
        "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
        "history": [{"created": created_iso, "created_by": "packaging/image/build.sh"}],
    })
    blob = lambda data: "blobs/sha256/" + hashlib.sha256(data).hexdigest()
    docker_manifest = canonical([{"Config": blob(config), "RepoTags": args.tag,
                                  "Layers": [blob(layer)]}])
    entries = [("blobs", None), ("blobs/sha256", None), (blob(config), config),
               (blob(layer), layer), ("manifest.json", docker_manifest)]
    with tarfile.open(args.out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.mtime = args.created
            info.uname = info.gname = ""
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    print(json.dumps({"image_id": digest(config), "layer": digest(layer),
                      "layer_bytes": len(layer)}))


if __name__ == "__main__":
    main()
