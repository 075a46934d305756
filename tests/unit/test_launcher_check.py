"""A kernel's launcher checked against the kernel (runtime/launcher_check.py): its arity, and the
shared object its code lives in against the file its module came from. The dynamic loader hands
back an object already loaded for a file with the same inode, whatever its path: a hard link
shows it here with a C module of Python's own. The rebuild itself needs CUDA
(tests/kernels/test_launcher_check_gpu.py)."""
import importlib.util
import os
import shutil
import sysconfig
import types

import pytest

from solder.runtime import launcher_check as lc


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _json_library():
    import _json
    path = getattr(_json, "__file__", None)
    if not path or not path.endswith(sysconfig.get_config_var("EXT_SUFFIX")):
        pytest.skip("_json is built into this Python, not a shared object")
    return path


def test_a_hard_linked_copy_runs_the_first_files_code(tmp_path):
    original = _json_library()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = tmp_path / "a" / os.path.basename(original)
    b = tmp_path / "b" / os.path.basename(original)
    shutil.copy(original, a)
    os.link(a, b)
    first, second = _load("_json", str(a)), _load("_json", str(b))
    assert lc.launcher_problem(first.scanstring, None) is None
    problem = lc.launcher_problem(second.scanstring, None)
    assert problem is not None and str(a) in problem and str(b) in problem


def test_code_file_names_the_shared_object():
    import _json
    path = _json_library()
    assert os.path.realpath(lc.code_file(_json.scanstring)) == os.path.realpath(path)
    assert lc.code_file(lambda: None) is None   # not a C function


def _raises(n):
    def launch(*args):
        raise TypeError(f"function takes exactly {n} arguments ({len(args)} given)")
    return launch


def test_arity_is_read_from_the_launchers_own_error():
    assert lc.launch_arity(_raises(19)) == 19
    assert lc.launcher_problem(_raises(19), 19) is None
    assert "takes 19 arguments, the kernel's 22" in lc.launcher_problem(_raises(19), 22)
    assert lc.launch_arity(lambda: None) is None   # took no arguments: nothing to tell


def _kernel(launch, parameters):
    src = types.SimpleNamespace(signature={f"p{i}": "*fp32" for i in range(parameters)},
                                constants={}, fn=None)
    return types.SimpleNamespace(_run=types.SimpleNamespace(launch=launch), src=src,
                                 name="k", metadata=None)


def test_a_wrong_launcher_is_rebuilt_and_counted(monkeypatch):
    base = lc.expected_arity(_kernel(None, 0))
    kernel = _kernel(_raises(base + 6), 9)
    monkeypatch.setattr(lc, "rebuild_launch", lambda k: _raises(base + 9))
    stats = {}
    assert lc.check_and_repair(kernel, stats)
    assert lc.launch_arity(kernel._run.launch) == base + 9
    assert stats == {"launchers_rebuilt": 1}
    assert not lc.check_and_repair(kernel, stats)   # checked once


def test_a_launcher_still_wrong_after_its_rebuild_is_an_error(monkeypatch):
    base = lc.expected_arity(_kernel(None, 0))
    monkeypatch.setattr(lc, "rebuild_launch", lambda k: _raises(base + 6))
    with pytest.raises(lc.LauncherMismatch, match="rebuilt it still is not"):
        lc.check_and_repair(_kernel(_raises(base + 6), 9))


def test_a_right_launcher_is_kept(monkeypatch):
    base = lc.expected_arity(_kernel(None, 0))
    launch = _raises(base + 9)
    monkeypatch.setattr(lc, "rebuild_launch", lambda k: pytest.fail("rebuilt a right launcher"))
    kernel = _kernel(launch, 9)
    assert not lc.check_and_repair(kernel)
    assert kernel._run.launch is launch
