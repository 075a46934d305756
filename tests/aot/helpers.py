"""Small programs and package surgery shared by the package tests."""
import json
import zipfile

import torch

from solder.aot import container


class MLP(torch.nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear, with a non-persistent buffer (a constant that a
    package stores even without weights) and two results in a dict."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.l2 = torch.nn.Linear(32, 8)
        self.register_buffer("scale", torch.tensor(0.5), persistent=False)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.ln(self.l1(x)))
        return {"y": self.l2(h) * self.scale, "total": x.sum(dim=1)}


def members_of(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def rewrite(path, out, change_info=None, change_member=None):
    """A copy of a package with package.json edited (manifest rebuilt: a consistent package
    built elsewhere) or with one member's bytes replaced (old manifest kept: tampering)."""
    members = members_of(path)
    manifest = members.pop(container.MANIFEST)
    if change_info is not None:
        info = json.loads(members["package.json"])
        change_info(info)
        members["package.json"] = json.dumps(info).encode()
        container.write(out, members)
        return out
    name, data = change_member
    members[name] = data
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(container.MANIFEST, manifest)
        for n, d in members.items():
            z.writestr(n, d)
    return out
