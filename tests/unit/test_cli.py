"""``python -m solder``: no command is an error that lists the commands, ``--version``, help
text without the docstrings' markup, and ``import solder.backend`` giving the module."""
import subprocess
import sys
import types

import pytest

import solder
from solder.__main__ import COMMANDS, main


def test_no_command_prints_the_commands_and_fails(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "usage: python -m solder <command>" in err
    assert all(f"  {name}" in err for name in COMMANDS)


def test_help_succeeds(capsys):
    assert main(["--help"]) == 0
    assert "--version" in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"solder {solder.__version__} (torch ") and "triton" in out


def test_python_dash_m_solder_without_a_command_exits_non_zero():
    r = subprocess.run([sys.executable, "-m", "solder"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "commands:" in r.stderr


def _parsers():
    from solder import demo, explain_cli
    from solder.aot import cli as aot_cli
    from solder.bench import cli as bench_cli
    from solder.conformance import cli as conformance_cli
    from solder.runtime import cache_cli
    return {"demo": lambda: demo.main(["--help"]),
            "bench": lambda: bench_cli.parse_args(["--help"]),
            "conformance": lambda: conformance_cli.build_parser().parse_args(["--help"]),
            "explain": lambda: explain_cli.build_parser().parse_args(["--help"]),
            "cache": lambda: cache_cli._parser().parse_args(["--help"]),
            "aot": lambda: aot_cli.main(["--help"])}


@pytest.mark.parametrize("command", ["demo", "bench", "conformance", "explain", "cache", "aot"])
def test_help_text_has_no_markup(command, capsys):
    with pytest.raises(SystemExit) as done:
        _parsers()[command]()
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"python -m solder {command}" in out
    assert "``" not in out, out


def test_bad_arguments_usage_has_no_markup(capsys):
    from solder import explain_cli
    with pytest.raises(SystemExit):
        explain_cli.build_parser().parse_args([])
    assert "``" not in capsys.readouterr().err


def test_import_solder_backend_gives_the_module():
    import solder.backend as backend_module
    assert isinstance(backend_module, types.ModuleType)
    assert isinstance(solder.backend, types.ModuleType)
    assert backend_module.solder_backend is solder.compile_backend
    assert backend_module.solder_debug_backend is solder.debug_backend
    assert "compile_backend" in solder.__all__ and "backend" not in solder.__all__
