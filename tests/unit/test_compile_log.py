"""``log_compile``: one line per graph, written after its first call, with every stage's time,
the kernel counts and the cache state (a hit says so too)."""
import logging

import torch

import solder


def _logged(caplog, fn, *args, **options):
    torch._dynamo.reset()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="solder"):
        # at INFO (routine), shown with log_compile whatever the log's level
        logging.getLogger("solder").setLevel(logging.WARNING)
        torch.compile(fn, backend="solder", options={"log_compile": True, **options})(*args)
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "solder.compile")
    return [r.getMessage() for r in caplog.records if r.name == "solder.compile"]


def test_one_line_per_graph_after_its_first_call(caplog, tmp_path):
    def f(x):
        return (x.sin() * 2).sum(-1), x.cos()
    x = torch.randn(8, 32)
    (line,) = _logged(caplog, f, x, cache_dir=str(tmp_path))
    assert line.startswith("solder: graph") and "_inference: " in line
    for stage in ("capture", "lower", "schedule", "codegen", "first launches",
                  "the first call in all"):
        assert f"{stage} " in line, line
    assert "kernels" in line and line.endswith("cache miss")
    (hit,) = _logged(caplog, f, x, cache_dir=str(tmp_path))
    assert hit.endswith("cache hit") and "lower " not in hit


def test_nothing_is_logged_unless_asked(caplog):
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="solder"):
        torch.compile(lambda x: x * 2, backend="solder")(torch.randn(4))
    assert not [r for r in caplog.records if r.name.startswith("solder")]


def test_stages_report_cpu_seconds_beside_wall_seconds_and_the_first_calls(capsys):
    # wall seconds much longer than the thread's CPU seconds mean it waited (for the GIL)
    from solder.backend import backend_for
    from solder.bench.profile import _solder_stages
    from solder.config import Config
    from solder.pipeline import CompileContext
    ctx = CompileContext(Config().replace(cache=False))
    torch._dynamo.reset()
    torch.compile(lambda x: (x.sin() * 2).sum(-1), backend=backend_for({"cache": False}, ctx))(
        torch.randn(8, 32))
    (t,) = [g.timings for g in ctx.graphs]
    own = t["lower"] + t["schedule"] + t["codegen"]
    assert 0 < t["cpu_lower_schedule_codegen"] <= own + 0.01
    assert 0 < t["cpu_capture"] <= t["capture"] + 0.01
    # and the first call's wall seconds, which hold its first launches (and any wait, tuning)
    assert t["first_call_wall"] >= t["triton_compile"] > 0
    _solder_stages(ctx, 10.0)   # the bench's stage table: counts beside the stages, not ones
    table = capsys.readouterr().out
    assert "cpu_lower_schedule_codegen: " in table and "first_call_wall: " in table
    assert not any(line.split()[0].startswith("cpu_") for line in table.splitlines()[2:])
