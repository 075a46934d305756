"""The on-disk compile cache: keys, round trips, atomic concurrent writes, damage detection,
unsafe and unwritable folders, and the ``python -m solder cache`` command line."""
from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from solder.config import Config
from solder.runtime import cache as cache_mod
from solder.runtime import cache_cli
from solder.runtime.cache import (CACHE_FORMAT, MANIFEST, CacheWarning, DiskCache,
                                  cache_from_config, default_cache_dir, make_key)

REPO = Path(__file__).resolve().parents[2]
FILES = {"wrapper.py": b"def call(args):\n    return args\n",
         "kernel_0.py": b"@triton.jit\ndef k(x): pass\n",
         "kernel_0.cubin": bytes(range(256)) * 4,
         "meta.json": b'{"grid": [1, 1, 1]}'}


@pytest.fixture
def cache(tmp_path) -> DiskCache:
    c = DiskCache(tmp_path / "cache")
    assert c.enabled
    return c


def entry_dir(c: DiskCache, key: str) -> Path:
    return c.root / "entries" / key


# -- keys ---------------------------------------------------------------------------------------


def test_key_is_stable_and_canonical():
    parts = ("graph", {"b": 2, "a": (1, 2.5, None, True)}, torch.float16, torch.Size([4, 8]),
             b"\x00\x01", [1, "x"], Config().codegen_key())
    k = make_key(*parts)
    assert len(k) == 64 and int(k, 16) >= 0
    assert make_key(*parts) == k
    assert make_key("graph", {"a": (1, 2.5, None, True), "b": 2}, *parts[2:]) == k  # dict order


def test_every_part_changes_the_key():
    values = [None, True, False, 0, 1, -1, 1.0, 0.0, -0.0, float("inf"), "", "1", "a", b"", b"1",
              (), (1,), (1, 2), ((1,), 2), [1], [], {}, {"a": 1}, {"a": 2}, {"b": 1},
              {1: "a"}, {"1": "a"}, torch.float32, torch.float16, torch.int32,
              torch.Size([2, 3]), torch.Size([3, 2]), torch.Size([]), frozenset({1})]
    keys = {make_key(v) for v in values}
    assert len(keys) == len(values), "two different parts gave one key"
    # Nesting and splitting are not confused either.
    assert len({make_key("ab"), make_key("a", "b"), make_key(("a", "b")), make_key()}) == 4
    with pytest.raises(TypeError):
        make_key(object())


def test_versions_feed_the_key(monkeypatch, tmp_path):
    base = make_key("g")
    changes = [(torch, "__version__", "0.0.0"), (triton, "__version__", "0.0.0"),
               (sys, "version", "3.0.0 (fake)"), (cache_mod, "CACHE_FORMAT", CACHE_FORMAT + 1)]
    for obj, attr, value in changes:
        with monkeypatch.context() as m:
            m.setattr(obj, attr, value)
            assert make_key("g") != base, attr
    with monkeypatch.context() as m:
        m.setattr(cache_mod, "_solder_version", lambda: "9.9.9")
        assert make_key("g") != base
    # An edit to solder's source changes the key even without a version bump, from the next
    # process on (a process reads the sources once: the code it runs is what it imported).
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(cache_mod, "_PACKAGE_DIR", pkg)
    before = make_key("g")
    (pkg / "a.py").write_text("x = 2\n")
    assert make_key("g") == before
    cache_mod._source_fingerprint.cache_clear()   # a new process
    assert make_key("g") != before
    monkeypatch.undo()
    assert make_key("g") == base


def test_default_dir_and_config(monkeypatch, tmp_path):
    monkeypatch.delenv("SOLDER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "solder"
    monkeypatch.setenv("SOLDER_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("SOLDER_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "solder"
    assert cache_from_config(Config(cache=False)) is None
    c = cache_from_config(Config(cache_dir=str(tmp_path / "cfg")))
    assert c.enabled and c.root == tmp_path / "cfg"


# -- round trip and layout ----------------------------------------------------------------------


def test_round_trip_and_modes(cache):
    key = make_key("round trip")
    assert cache.get(key) is None
    assert cache.put(key, FILES)
    assert cache.get(key) == FILES
    assert cache.put(key, FILES)  # a second put of a stored key is a no-op that succeeds
    assert stat.S_IMODE(os.stat(cache.root).st_mode) == 0o700
    d = entry_dir(cache, key)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    for f in d.iterdir():
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    manifest = json.loads((d / MANIFEST).read_bytes())
    assert manifest["key"] == key and set(manifest["files"]) == set(FILES)
    assert not list((cache.root / "tmp").iterdir())  # nothing left behind


def test_bad_names_and_keys_are_programming_errors(cache):
    key = make_key("x")
    for name in ("../evil", ".hidden", "a/b", MANIFEST, ""):
        with pytest.raises(ValueError):
            cache.put(key, {name: b""})
    with pytest.raises(TypeError):
        cache.put(key, {"a.py": "not bytes"})
    for bad in ("../../etc", "ABC", key[:-1]):
        with pytest.raises(ValueError):
            cache.get(bad)


# -- concurrent writers -------------------------------------------------------------------------


def _writer(root: str, keys: list[str], tag: bytes, barrier, results) -> None:
    c = DiskCache(root)
    barrier.wait()
    ok = [c.put(k, {"wrapper.py": tag * 1000, "meta.json": tag}) for k in keys]
    seen = [c.get(k) for k in keys]
    results.put((all(ok), all(s is not None for s in seen)))


def test_concurrent_puts_from_four_processes(tmp_path):
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    root = str(tmp_path / "cache")
    keys = [make_key("concurrent", i) for i in range(16)]
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, keys, b"%d" % i, barrier, results))
             for i in range(4)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert outcomes == [(True, True)] * 4
    c = DiskCache(root)
    for k in keys:  # each entry is one writer's files, whole: never a mix of two
        files = c.get(k)
        assert files["wrapper.py"] == files["meta.json"] * 1000
    assert len(c.entries()) == len(keys)
    assert not list((Path(root) / "tmp").iterdir())


def test_losing_the_rename_race_keeps_the_winner(cache, monkeypatch):
    key = make_key("race")
    other = DiskCache(cache.root)
    real_fsync_dir = cache_mod._fsync_dir

    raced = []

    def winner_stores_first(path):  # runs just before our rename into place
        real_fsync_dir(path)
        if path.parent.name == "tmp" and not raced:
            raced.append(path)
            assert other.put(key, {"wrapper.py": b"winner"})
    monkeypatch.setattr(cache_mod, "_fsync_dir", winner_stores_first)
    monkeypatch.setattr(os.path, "isdir", lambda p: False)  # skip put's already-stored check
    assert cache.put(key, {"wrapper.py": b"loser"})
    monkeypatch.undo()
    assert raced
    assert cache.get(key) == {"wrapper.py": b"winner"}
    assert not list((cache.root / "tmp").iterdir())


# -- damage -------------------------------------------------------------------------------------


def _damage_then_rebuild(cache, key, damage):
    assert cache.put(key, FILES)
    damage(entry_dir(cache, key))
    with pytest.warns(CacheWarning, match="damaged"):
        assert cache.get(key) is None
    assert not entry_dir(cache, key).exists(), "a damaged entry is removed"
    assert cache.get(key) is None  # a plain miss now, without a second warning
    assert cache.put(key, FILES) and cache.get(key) == FILES  # rebuilt


def test_truncated_file_is_detected_and_rebuilt(cache):
    def truncate(d):
        data = (d / "kernel_0.cubin").read_bytes()
        (d / "kernel_0.cubin").write_bytes(data[: len(data) // 2])
    _damage_then_rebuild(cache, make_key("truncate"), truncate)


def test_flipped_byte_is_detected_and_rebuilt(cache):
    def flip(d):
        data = bytearray((d / "wrapper.py").read_bytes())
        data[5] ^= 0x01
        (d / "wrapper.py").write_bytes(bytes(data))
    _damage_then_rebuild(cache, make_key("flip"), flip)


@pytest.mark.parametrize("damage", ["missing file", "missing manifest", "bad json", "symlink"])
def test_other_damage_is_detected(cache, damage, tmp_path):
    def do(d):
        if damage == "missing file":
            (d / "meta.json").unlink()
        elif damage == "missing manifest":
            (d / MANIFEST).unlink()
        elif damage == "bad json":
            (d / MANIFEST).write_bytes((d / MANIFEST).read_bytes()[:-7])
        else:  # a file swapped for a link to the same bytes elsewhere is refused too
            target = tmp_path / "elsewhere"
            target.write_bytes(FILES["meta.json"])
            (d / "meta.json").unlink()
            (d / "meta.json").symlink_to(target)
    _damage_then_rebuild(cache, make_key("damage", damage), do)


def test_manifest_for_another_key_is_refused(cache):
    a, b = make_key("a"), make_key("b")
    assert cache.put(a, FILES)
    os.rename(entry_dir(cache, a), entry_dir(cache, b))  # a's entry under b's name
    with pytest.warns(CacheWarning, match="manifest is for key"):
        assert cache.get(b) is None
    assert not entry_dir(cache, b).exists()


# -- unsafe and unwritable folders --------------------------------------------------------------


def test_group_writable_root_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o770)
    with pytest.warns(CacheWarning, match=r"writable by group or others.*chmod 700"):
        c = DiskCache(root)
    assert not c.enabled and str(root) in c.reason
    key = make_key("x")
    assert c.put(key, FILES) is False and c.get(key) is None
    assert not (root / "entries").exists()  # nothing was written into it


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="making a folder owned by someone else needs root")
def test_root_owned_by_someone_else_is_refused(tmp_path):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    with pytest.warns(CacheWarning, match="owned by uid 65534"):
        c = DiskCache(root)
    assert not c.enabled


def _writes_are_enforced(d: Path) -> bool:
    """Whether ``d``'s mode bits stop a write: not when running as root (or similar)."""
    try:
        (d / "probe").write_bytes(b"")
    except OSError:
        return True
    (d / "probe").unlink()
    return False


def _fail(err: int):
    def raiser(*args, **kwargs):
        raise OSError(err, os.strerror(err))
    return raiser


def test_read_only_root_switches_caching_off_with_one_warning(tmp_path, monkeypatch):
    c = DiskCache(tmp_path / "cache")
    stored = make_key("stored")
    assert c.put(stored, FILES)
    dirs = [c.root, c.root / "entries", c.root / "tmp"]
    for d in dirs:
        os.chmod(d, 0o500)
    try:
        if not _writes_are_enforced(c.root / "tmp"):
            # Running as root, where mode bits do not stop writes: fail the way the kernel would.
            monkeypatch.setattr(cache_mod, "_make_tmpdir", _fail(errno.EACCES))
        with pytest.warns(CacheWarning, match="switched off") as record:
            assert c.put(make_key("new"), FILES) is False
            assert c.put(make_key("newer"), FILES) is False
            assert c.get(stored) is None  # off means off: every get misses
        assert len([w for w in record if issubclass(w.category, CacheWarning)]) == 1
        assert not c.enabled
    finally:
        for d in dirs:
            os.chmod(d, 0o700)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_full_disk_mid_write_leaves_nothing_behind(tmp_path, monkeypatch, err):
    c = DiskCache(tmp_path / "cache")
    monkeypatch.setattr(cache_mod, "_write_file", _fail(err))
    with pytest.warns(CacheWarning, match="switched off"):
        assert c.put(make_key("x"), FILES) is False
    assert not c.enabled
    assert not list((c.root / "tmp").iterdir()) and not c.entries()


def test_transient_error_skips_without_switching_off(cache, monkeypatch):
    monkeypatch.setattr(cache_mod, "_make_tmpdir", _fail(errno.ENOENT))
    with pytest.warns(CacheWarning, match="skipped"):
        assert cache.put(make_key("x"), FILES) is False
    assert cache.enabled


def test_uncreatable_root_is_off_not_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.warns(CacheWarning):
        c = DiskCache(blocker / "cache")  # its parent is a file
    assert not c.enabled and c.get(make_key("x")) is None


# -- listing, clearing, command line -----------------------------------------------------------


def test_entries_and_clear(cache):
    keys = [make_key("list", i) for i in range(3)]
    for k in keys:
        assert cache.put(k, FILES)
    infos = cache.entries()
    assert sorted(e.key for e in infos) == sorted(keys)
    for e in infos:
        assert set(e.files) == set(FILES) and e.size > sum(map(len, FILES.values()))
        assert e.mtime > 0
    assert cache.clear() == 3
    assert cache.entries() == [] and cache.get(keys[0]) is None
    assert cache.clear() == 0


def test_cli_main(tmp_path, capsys):
    root = tmp_path / "cache"
    c = DiskCache(root)
    for i in range(2):
        c.put(make_key("cli", i), FILES)
    assert cache_cli.main(["--dir", str(root), "list"]) == 0
    out = capsys.readouterr().out
    assert "2 entries" in out and "wrapper.py" in out and str(root) in out
    assert cache_cli.main(["path", "--dir", str(root)]) == 0
    assert capsys.readouterr().out.strip() == str(root)
    assert cache_cli.main(["clear", "--dir", str(root)]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert not c.entries()


def test_cli_refuses_unsafe_dir(tmp_path, capsys):
    root = tmp_path / "open"
    root.mkdir()
    os.chmod(root, 0o777)
    assert cache_cli.main(["--dir", str(root), "list"]) == 1
    err = capsys.readouterr().err
    assert str(root) in err and "chmod 700" in err


def test_cli_subprocess(tmp_path):
    env = dict(os.environ, SOLDER_CACHE_DIR=str(tmp_path / "env"), PYTHONPATH=str(REPO))
    run = lambda *a: subprocess.run([sys.executable, "-m", "solder", "cache", *a], env=env,
                                    capture_output=True, text=True, timeout=60, cwd=REPO)
    r = run("path")
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path / "env")
    r = run("list")
    assert r.returncode == 0 and "0 entries" in r.stdout
