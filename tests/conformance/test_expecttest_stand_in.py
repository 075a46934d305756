"""Without expecttest installed, the OpInfo database still imports (a stand-in module)."""
import subprocess
import sys
import textwrap


def test_op_db_imports_without_expecttest():
    # a fresh interpreter where importing expecttest fails, as on a machine without it
    code = textwrap.dedent("""
        import importlib.abc, sys, warnings
        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "expecttest":
                    raise ModuleNotFoundError("No module named 'expecttest'")
        sys.meta_path.insert(0, Hide())
        sys.modules.pop("expecttest", None)
        from solder.conformance import selection
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ops = selection.all_opinfos()
        assert sys.modules["expecttest"].__doc__.startswith("Solder's stand-in")
        assert any("expecttest is not installed" in str(w.message) for w in caught)
        assert len(ops) > 600 and "add" in ops
        try:
            sys.modules["expecttest"].TestCase().assertExpectedInline("a", "b")
        except RuntimeError as e:
            assert "pip install expecttest" in str(e)
        else:
            raise AssertionError("an expect-test passed through the stand-in")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_nothing_is_replaced_where_expecttest_is_installed():
    import pytest
    pytest.importorskip("expecttest")
    from solder.conformance.selection import provide_expecttest
    assert provide_expecttest() is False
