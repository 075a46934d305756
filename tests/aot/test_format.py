"""The package container and its tensor blobs: round trip, and every way a damaged file is
refused (checked before anything in it is used)."""
import json
import zipfile

import pytest
import torch

from solder.aot import container, tensors
from solder.aot.container import PackageError


def _package(tmp_path, members=None):
    members = members or {"a.json": b'{"x": 1}', "b.bin": bytes(range(256)) * 40}
    p = tmp_path / "p.solder"
    container.write(p, members)
    return p, members


def _manifest(p) -> dict:
    with zipfile.ZipFile(p) as z:
        return json.loads(z.read(container.MANIFEST))


def _repack(tmp_path, manifest: dict, members: dict):
    """A zip with the given manifest and members, valid as a zip (its own CRCs)."""
    q = tmp_path / "q.solder"
    with zipfile.ZipFile(q, "w") as z:
        z.writestr(container.MANIFEST, json.dumps(manifest))
        for n, d in members.items():
            z.writestr(n, d)
    return q


def test_round_trip(tmp_path):
    p, members = _package(tmp_path)
    manifest, back = container.read(p)
    assert back == members
    assert manifest["format"] == container.FORMAT
    assert set(manifest["members"]) == set(members)


def test_truncated_is_refused(tmp_path):
    p, _ = _package(tmp_path)
    data = p.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 5):
        (tmp_path / "cut.solder").write_bytes(data[:cut])
        with pytest.raises(PackageError, match="truncated or damaged|not a complete"):
            container.read(tmp_path / "cut.solder")


def test_flipped_byte_is_refused(tmp_path):
    p, _ = _package(tmp_path)
    data = bytearray(p.read_bytes())
    at = data.find(bytes(range(256)))
    data[at + 3] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(PackageError):
        container.read(p)


def test_member_changed_under_an_old_manifest_is_refused(tmp_path):
    p, members = _package(tmp_path)
    q = _repack(tmp_path, _manifest(p), {**members, "a.json": b'{"x": 2}'})   # stale checksum
    with pytest.raises(PackageError, match="a.json fails its checksum"):
        container.read(q)


def test_extra_or_missing_member_is_refused(tmp_path):
    p, members = _package(tmp_path)
    q = _repack(tmp_path, _manifest(p), {**members, "evil.py": b"import os"})
    with pytest.raises(PackageError, match="not listed: \\['evil.py'\\]"):
        container.read(q)


@pytest.mark.parametrize("fmt,word", [(container.FORMAT + 1, "newer"),
                                     (container.OLDEST - 1, "older")])
def test_another_format_is_refused(tmp_path, fmt, word):
    p, members = _package(tmp_path)
    q = _repack(tmp_path, {**_manifest(p), "format": fmt}, members)
    with pytest.raises(PackageError, match=f"format {fmt} is {word}"):
        container.read(q)


def test_the_oldest_readable_format_still_loads(tmp_path):
    """Format 3 only added the user-kernel member: a format 2 package reads as it did."""
    p, members = _package(tmp_path)
    q = _repack(tmp_path, {**_manifest(p), "format": container.OLDEST}, members)
    assert container.read(q)[0]["format"] == container.OLDEST


def test_not_a_package(tmp_path):
    q = tmp_path / "q.zip"
    with zipfile.ZipFile(q, "w") as z:
        z.writestr("x", b"y")
    with pytest.raises(PackageError, match="not a Solder package"):
        container.read(q)
    with pytest.raises(PackageError, match="no such package"):
        container.read(tmp_path / "absent.solder")


def _sample():
    g = torch.Generator().manual_seed(0)
    cpu = dict(device="cpu")  # (the GPU test run makes cuda the default device)
    return {"w": torch.randn(3, 5, generator=g, **cpu),
            "h": torch.randn(4, generator=g, **cpu).half(),
            "b": torch.randn(2, 2, generator=g, **cpu).bfloat16(),
            "m": torch.tensor([True, False], **cpu), "i": torch.arange(6, **cpu).reshape(2, 3),
            "e": torch.empty(0, 3, **cpu), "view": torch.arange(10.0, **cpu)[2:7]}


def _assert_same(a, b):
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        assert torch.equal(a[k].cpu(), b[k].cpu()), k


@pytest.mark.parametrize("write_with_library", [True, False])
def test_tensor_blob_reads_the_same_with_or_without_safetensors(write_with_library):
    st = pytest.importorskip("safetensors.torch")
    sample = _sample()
    plain = {k: v.contiguous() for k, v in sample.items()}
    blob = st.save(plain) if write_with_library else tensors._dumps(plain)
    _assert_same(tensors._loads(blob), sample)   # our own reader
    _assert_same(st.load(blob), sample)          # the library's reader


def test_tensor_blob_without_the_library(monkeypatch):
    monkeypatch.setattr(tensors, "_library", lambda: None)
    sample = _sample()
    _assert_same(tensors.loads(tensors.dumps(sample)), sample)


def test_tensor_blob_bad_offsets_refused():
    blob = bytearray(tensors._dumps({"w": torch.ones(4, device="cpu")}))
    blob = bytes(blob[:-4])  # data shorter than the header says
    with pytest.raises(ValueError, match="offsets"):
        tensors._loads(blob)
