"""The package file: a zip of plain members (JSON, text, safetensors, kernel binaries) plus a
manifest of their sha256 checksums.

Nothing in a package is unpickled or imported by reading it: JSON is parsed, tensors are raw
bytes behind a JSON header, binaries are bytes handed to the GPU driver, and the two Python
sources (the wrapper and, on the CPU, the Triton kernels) run only after their checksums match.
``read`` checks that the zip is whole, that its members are exactly the manifest's, and every
member's size and sha256 before anything is used. The checksums catch truncation, corruption and
edits that leave the manifest alone; they are not a signature (whoever can rewrite the file can
rewrite the manifest too): trust a package as you would trust code.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

# Bump when members change meaning; a reader refuses any package of a newer format.
FORMAT = 3   # 2: kernel specializations name each pointer's dtype; 3: user Triton kernels
OLDEST = 2   # format 3 only added a member: format 2 packages still load
MANIFEST = "manifest.json"
MAGIC = "solder-aot-package"


class PackageError(RuntimeError):
    """A package that cannot be used: damaged, tampered with, or built for somewhere else."""


def write(path: str | os.PathLike, members: dict[str, bytes]) -> None:
    """Write ``members`` and their manifest to ``path`` (through a temporary file, so a reader
    never sees half a package under the final name)."""
    manifest = {"magic": MAGIC, "format": FORMAT,
                "members": {name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                            for name, data in sorted(members.items())}}
    path = Path(path)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        # stored, not deflated: loading is then a copy, and binaries and weights barely shrink
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
            for name, data in sorted(members.items()):
                z.writestr(name, data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read(path: str | os.PathLike) -> tuple[dict, dict[str, bytes]]:
    """(manifest, members) of a whole, untampered package; raises PackageError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise PackageError(f"{path}: no such package file")
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if MANIFEST not in names:
                raise PackageError(f"{path}: not a Solder package (no {MANIFEST})")
            manifest = _parse_manifest(path, z.read(MANIFEST))
            listed = manifest["members"]
            present = [n for n in names if n != MANIFEST]
            if len(set(names)) != len(names):
                raise PackageError(f"{path}: a member name appears twice")
            extra = sorted(set(present) - set(listed))
            missing = sorted(set(listed) - set(present))
            if extra or missing:
                raise PackageError(f"{path}: members do not match the manifest "
                                   f"(not listed: {extra}, missing: {missing})")
            members = {}
            for name, want in listed.items():
                data = z.read(name)
                if len(data) != want["size"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
                    raise PackageError(f"{path}: member {name} fails its checksum (the package "
                                       "was damaged or edited after it was written)")
                members[name] = data
    except PackageError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, KeyError,
            ValueError) as e:
        raise PackageError(f"{path}: not a complete Solder package (truncated or damaged: "
                           f"{type(e).__name__}: {e})") from e
    return manifest, members


def _parse_manifest(path, raw: bytes) -> dict:
    try:
        m = json.loads(raw.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PackageError(f"{path}: unreadable manifest ({e})") from e
    if not isinstance(m, dict) or m.get("magic") != MAGIC:
        raise PackageError(f"{path}: not a Solder package (manifest has no {MAGIC!r} marker)")
    fmt = m.get("format")
    if not isinstance(fmt, int):
        raise PackageError(f"{path}: manifest has no format version")
    if fmt > FORMAT:
        raise PackageError(f"{path}: package format {fmt} is newer than this Solder reads "
                           f"(format {FORMAT}); load it with a newer Solder or rebuild it")
    if fmt < OLDEST:
        raise PackageError(f"{path}: package format {fmt} is older than this Solder reads "
                           f"(format {OLDEST}: its kernel binaries are keyed differently); "
                           "rebuild it")
    members = m.get("members")
    if not isinstance(members, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("sha256"), str)
            and isinstance(v.get("size"), int) for v in members.values()):
        raise PackageError(f"{path}: malformed manifest member list")
    return m
