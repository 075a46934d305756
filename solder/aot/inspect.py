"""What is inside a package, as text (``python -m solder aot inspect PATH``)."""
from __future__ import annotations

import json

from . import container, versions
from .container import PackageError


def _mb(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def _shape(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def describe(path) -> str:
    """A readable summary: versions, whether this machine can run it, inputs and outputs with
    their symbolic sizes and ranges, kernels and their binaries, library calls, fallbacks,
    weights and the size of every member."""
    manifest, members = container.read(path)
    info = json.loads(members["package.json"].decode())
    built, spec = info["built"], info["spec"]
    lines = [f"Solder package {path} (format {manifest['format']})"]
    target = built["device"]
    if target == "cuda":
        target += f" {built['gpu_arch']} ({built.get('gpu_name', '?')})"
    else:
        target += " (Triton interpreter)"
    lines.append(f"  built for  {target}")
    lines.append(f"  versions   solder {built['solder']}, torch {built['torch']}, "
                 f"triton {built['triton']}, python {built['python']}")
    try:
        versions.check(built, path)
        lines.append("  here       loadable on this machine")
    except PackageError as e:
        lines.append(f"  here       NOT loadable: {str(e).split(': ', 1)[-1]}")
    lines.append("inputs:")
    for e in spec["inputs"]:
        if e.get("kind", "tensor") == "tensor":
            lines.append(f"  {e['name']}: {e['dtype']}{_shape(e['shape'])} on {e['device']}, "
                         f"{e.get('layout', 'contiguous')}")
        else:
            lines.append(f"  {e['name']}: {e.get('kind')} {e.get('value')!r}")
    if spec["symbols"]:
        lines.append("symbolic sizes:")
        for sym, r in sorted(spec["symbols"].items()):
            lo = r["min"] if r["min"] is not None else "-inf"
            hi = r["max"] if r["max"] is not None else "inf"
            lines.append(f"  {sym} in [{lo}, {hi}]")
    lines.append("outputs:")
    for e in spec["outputs"]:
        if "dtype" in e:
            lines.append(f"  {e['name']}: {e['dtype']}{_shape(e['shape'])} on {e['device']}")
        else:
            lines.append(f"  {e['name']}: {e.get('kind')}")
    index = json.loads(members["binaries/index.json"].decode())
    binaries = {k: item for item in index for k in item["kernels"]}
    lines.append(f"kernels: {len(info['kernels'])}")
    for k in info["kernels"]:
        item = binaries.get(k["name"])
        extra = ""
        if item is not None:
            size = sum(len(members[b["files"]["cubin"]]) for b in item["binaries"])
            extra = f"  [{len(item['binaries'])} binaries, {_mb(size)}]"
        lines.append(f"  {k['name']}: {', '.join(k['ops'][:6])}"
                     f"{' ...' if len(k['ops']) > 6 else ''}{extra}")
    missing = [k for item in index if item.get("generic_failed") for k in item["kernels"]]
    if missing:
        lines.append(f"  no generic binary (only the build-time sizes run): {', '.join(missing)}")
    users = json.loads(members.get("binaries/user_kernels.json", b"[]").decode())
    if users:
        lines.append(f"user Triton kernels: {len(users)}")
        for u in users:
            cfg = ", ".join(f"{k}={v[-1]}" for k, v in sorted(u["config"].items()))
            size = sum(len(members[b["files"]["cubin"]]) for b in u["binaries"])
            lines.append(f"  {u['label']} (called at {u['site'] or '?'}): {cfg or 'no config'}"
                         f"  [{len(u['binaries'])} binaries, {_mb(size)}]")
            if u.get("generic_failed"):
                lines.append("    no generic binary (only the build-time sizes run)")
    if info["externs"]:
        lines.append(f"library calls: {', '.join(info['externs'])}")
    for op, reason in info["fallbacks"]:
        lines.append(f"ATen fallback: {op}: {reason}")
    w = info["weights"]
    count = sum(_numel(t["shape"]) for t in w["tensors"].values())
    lines.append(f"weights: {len(w['tensors'])} tensors, {count} elements, "
                 + ("stored" if w["stored"] else "left out (load with state_dict=...)"))
    if info["constants"]:
        lines.append(f"constants: {len(info['constants'])} tensors (always stored)")
    lines.append("members:")
    for name, m in sorted(manifest["members"].items()):
        lines.append(f"  {name:<44} {_mb(m['size']):>12}  sha256 {m['sha256'][:16]}")
    return "\n".join(lines)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
