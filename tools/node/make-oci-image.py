#!/usr/bin/env python3
"""Packs files into a single-layer OCI image archive (oci-layout, index.json, blobs/sha256/*) that
`ctr images import` accepts, for the test control plane's real node (tools/build-node.sh). No registry, no
Docker.

usage: make-oci-image.py OUT.tar REF --entrypoint '["/pause"]' [--cmd '[...]'] SRC:DEST[:MODE] ...
  SRC is a host file, DEST its absolute path in the image. MODE is octal (default: the source's mode).
  --symlink LINK=TARGET adds a symlink (repeatable). REF is the full name, e.g. localhost/test-node/pause:1,
  stored in the org.opencontainers.image.ref.name annotation of index.json.
"""
import argparse, gzip, hashlib, io, json, os, tarfile

def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data

def main():
    p = argparse.ArgumentParser()
    p.add_argument("out"); p.add_argument("ref")
    p.add_argument("--entrypoint", default="null"); p.add_argument("--cmd", default="null")
    p.add_argument("--symlink", action="append", default=[])
    p.add_argument("files", nargs="*")
    a = p.parse_intermixed_args()

    # Layer: deterministic tar (mtime 0, root-owned), parent directories first.
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = set()
        def add_dirs(path):
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755
                    tar.addfile(ti)
        for spec in a.files:
            src, dest, *mode = spec.split(":")
            add_dirs(dest)
            data = open(src, "rb").read()
            ti = tarfile.TarInfo(dest.lstrip("/")); ti.size = len(data)
            ti.mode = int(mode[0], 8) if mode else os.stat(src).st_mode & 0o7777
            tar.addfile(ti, io.BytesIO(data))
        for spec in a.symlink:
            link, target = spec.split("=", 1)
            add_dirs(link)
            ti = tarfile.TarInfo(link.lstrip("/")); ti.type = tarfile.SYMTYPE; ti.linkname = target
            tar.addfile(ti)
    layer_tar = raw.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    layer_digest, layer = blob(gzip.compress(layer_tar, mtime=0))

    config_digest, config = blob(json.dumps({
        "architecture": "amd64", "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Entrypoint": json.loads(a.entrypoint), "Cmd": json.loads(a.cmd),
                   "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "make-oci-image.py"}],
    }, sort_keys=True).encode())

    manifest_digest, manifest = blob(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest, "size": len(layer)}],
    }, sort_keys=True).encode())

    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"org.opencontainers.image.ref.name": a.ref,
                                       "io.containerd.image.name": a.ref}}],
    }, sort_keys=True).encode()

    with tarfile.open(a.out, "w") as out:
        def put(name, data):
            ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644
            out.addfile(ti, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", index)
        for d, data in ((layer_digest, layer), (config_digest, config), (manifest_digest, manifest)):
            put("blobs/sha256/" + d.split(":")[1], data)
    print(f"{a.out}: {a.ref} manifest {manifest_digest}")

if __name__ == "__main__":
    main()
