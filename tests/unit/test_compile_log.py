"""``log_compile``: one line per graph, written after its first call, with every stage's time,
the kernel counts and the cache state (a hit says so too)."""
import logging

import torch

import solder


def _logged(caplog, fn, *args, **options):
    torch._dynamo.reset()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="solder"):
        torch.compile(fn, backend="solder", options={"log_compile": True, **options})(*args)
    return [r.getMessage() for r in caplog.records if r.name == "solder"]


def test_one_line_per_graph_after_its_first_call(caplog, tmp_path):
    def f(x):
        return (x.sin() * 2).sum(-1), x.cos()
    x = torch.randn(8, 32)
    (line,) = _logged(caplog, f, x, cache_dir=str(tmp_path))
    assert line.startswith("solder: graph") and "_inference: " in line
    for stage in ("capture", "lower", "schedule", "codegen", "first launches"):
        assert f"{stage} " in line, line
    assert "kernels" in line and line.endswith("cache miss")
    (hit,) = _logged(caplog, f, x, cache_dir=str(tmp_path))
    assert hit.endswith("cache hit") and "lower " not in hit


def test_nothing_is_logged_unless_asked(caplog):
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="solder"):
        torch.compile(lambda x: x * 2, backend="solder")(torch.randn(4))
    assert not [r for r in caplog.records if r.name == "solder"]
