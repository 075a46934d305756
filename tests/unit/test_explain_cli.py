"""python -m solder explain: targets, argument forms, the printed report, exit statuses."""
import textwrap

import pytest

from solder import explain_cli

SCRIPT = textwrap.dedent("""
    import torch

    def scaled_softmax(x, scale):
        return torch.softmax(x * scale, dim=-1)

    def make():
        return scaled_softmax, (torch.randn(4, 8), 0.5)

    def make_with_kwargs():
        return scaled_softmax, (torch.randn(2, 4),), {"scale": 2.0}

    def sorts(x):   # histc has no lowering: an ATen fallback
        return torch.histc(x, bins=4) + 1

    def broken(x):
        raise ValueError("the user's own bug")

    def not_a_pair():
        return 3
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "explain_target.py"
    path.write_text(SCRIPT)
    return str(path)


def run(capsys, *argv):
    code = explain_cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_factory_target_prints_the_report(script, capsys):
    code, out, _ = run(capsys, f"{script}:make")
    assert code == 0
    assert out.startswith("Solder: 1 graph(s), 1 generated kernel(s), 0 library call(s), "
                          "0 ATen fallback(s)")
    assert "aten.mul.Tensor" in out and "inference" in out
    assert "explain_target.py" in out  # kernels name the user's source line


def test_args_expression_kwargs_factory_and_grad(script, capsys):
    code, out, _ = run(capsys, f"{script}:scaled_softmax", "--args", "torch.randn(3, 5), 2.0",
                       "--grad")
    assert code == 0 and "(forward)" in out and "(backward)" in out
    code, out, _ = run(capsys, f"{script}:make_with_kwargs", "--source")
    assert code == 0 and "@triton.jit" in out


def test_fallbacks_are_listed_with_their_reason(script, capsys):
    code, out, _ = run(capsys, f"{script}:sorts", "--args", "torch.randn(3, 6)")
    assert code == 0
    assert "ATen fallback: aten.histc (" in out


def test_module_target(tmp_path, capsys, monkeypatch):
    (tmp_path / "explain_mod_target.py").write_text(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = run(capsys, "explain_mod_target:make")
    assert code == 0 and "generated kernel" in out


@pytest.mark.parametrize("argv, message", [
    (["no_colon_here"], "TARGET must be"),
    (["{script}:missing"], "has no 'missing'"),
    (["{script}:not_a_pair"], "must return (fn, args)"),
    (["{script}:scaled_softmax"], "to get (fn, args) failed"),
    (["{script}:make", "--option", "no_such_option=1"], "unknown Solder option"),
    (["{script}:scaled_softmax", "--args", "undefined_name"], "--args"),
    (["/no/such/script.py:f"], "no such script"),
])
def test_usage_errors_exit_2(script, capsys, argv, message):
    code, _, err = run(capsys, *[a.format(script=script) for a in argv])
    assert code == 2
    assert message in err


def test_a_failing_function_exits_1(script, capsys):
    code, _, err = run(capsys, f"{script}:broken", "--args", "torch.randn(2)")
    assert code == 1
    assert "the user's own bug" in err
