"""The AOT benchmark's driver (solder/bench/aot.py) without a GPU: which phases it spawns for
the sides asked, and the table it prints from their results."""
from types import SimpleNamespace

import pytest

from solder.bench import aot


def _fake_spawn(spawned):
    def spawn(cmd, timeout):
        script, phase = cmd[1], cmd[3]
        spawned.append((script.rsplit("/", 1)[-1], phase))
        side = "inductor" if "inductor" in script else "solder"
        result = {"build": {"build_s": 1.0, "bytes": 2 ** 20},
                  "cold": {"t_end": 12.0, "import_s": 1.0, "load_s": 0.5, "first_call_s": 0.2},
                  "steady": {f"{side}_package_ms": 2.0, f"{side}_package_error": 1e-3}}[phase]
        return dict(result), 10.0
    return spawn


@pytest.mark.parametrize("sides", [["solder"], ["solder", "inductor"]])
def test_only_the_sides_asked_for_are_built_and_timed(tmp_path, monkeypatch, sides):
    spawned = []
    monkeypatch.setattr(aot, "_spawn", _fake_spawn(spawned))
    monkeypatch.setattr(aot, "_versions", lambda: {"gpu": "test"})
    args = SimpleNamespace(model="gpt2", out=str(tmp_path), quick=True, timeout=1, cold_reps=1,
                           sides=sides)
    res = aot.run_all(args)
    scripts = {s for s, _ in spawned}
    assert ("bench_aot_inductor.py" in scripts) == ("inductor" in sides)
    assert [p for s, p in spawned if s == "aot.py"] == ["build", "cold", "steady"]
    assert res["solder_cold"]["median_first_result_s"] == 2.0
    assert "| solder package | 1.0 | 1.0 | 2.000 | 2.000 |" in aot.table(res)


def test_an_unknown_side_is_refused(capsys):
    with pytest.raises(SystemExit):
        aot.main(["--model", "gpt2", "--sides", "solder,tensorrt"])
    assert "--sides takes solder and/or inductor" in capsys.readouterr().err
