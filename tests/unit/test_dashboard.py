"""The model dashboard: its suite of cases (solder/bench/suite.py), parts of it, and the merge of
several runs into summary rows (solder/bench/dashboard.py)."""
import json

import pytest

from solder.bench import dashboard
from solder.bench.suite import dashboard_cases, part_of


def test_the_suite_has_thirty_models_in_three_families_in_both_modes():
    cases = dashboard_cases()
    models = {c.name.rsplit(".", 1)[0] for c in cases}
    families = {m.split(".")[0] for m in models}
    assert len(models) >= 30 and families == {"torchvision", "timm", "transformers"}
    assert len(cases) == 2 * len(models)
    assert all(c.name.endswith((".inference", ".training")) for c in cases)
    assert {c.name for c in dashboard_cases("timm", "training")} == \
        {c.name for c in cases if c.name.startswith("timm.") and c.name.endswith(".training")}


def test_parts_cover_the_suite_once():
    cases = dashboard_cases()
    parts = [part_of(cases, f"{k}/4") for k in range(1, 5)]
    assert sorted(c.name for p in parts for c in p) == sorted(c.name for c in cases)
    with pytest.raises(ValueError):
        part_of(cases, "5/4")
    with pytest.raises(ValueError):
        part_of(cases, "two")


def _backend(status="ok", ms=None, compile_s=None, peak=None):
    return {"status": status, "median_ms": ms, "compile_s": compile_s, "peak_mib": peak,
            "detail": ""}


def _run(path, cases):
    path.write_text(json.dumps({"meta": {"device": "NVIDIA H100", "torch": "2.11"},
                                "cases": cases}))
    return str(path)


def test_summary_rows_from_two_parts(tmp_path):
    a = _run(tmp_path / "a.json", [
        {"case": "timm.m1.inference", "status": "ok", "backends": {
            "eager": _backend(ms=10.0, peak=100.0),
            "inductor": _backend(ms=5.0, compile_s=20.0, peak=80.0),
            "solder": _backend(ms=4.0, compile_s=8.0, peak=50.0)}},
        {"case": "timm.m2.inference", "status": "ok", "backends": {
            "eager": _backend(ms=10.0, peak=100.0),
            "inductor": _backend(ms=5.0, compile_s=10.0, peak=100.0),
            "solder": _backend("FAILED")}}])
    b = _run(tmp_path / "b.json", [   # m2 again, later: it replaces the first run
        {"case": "timm.m2.inference", "status": "ok", "backends": {
            "eager": _backend(ms=8.0, peak=100.0),
            "inductor": _backend(ms=4.0, compile_s=10.0, peak=100.0),
            "solder": _backend(ms=2.0, compile_s=4.0, peak=100.0)}},
        {"case": "gelu_chain", "status": "ok", "backends": {}}])   # not a dashboard case
    meta, rows = dashboard.load([a, b])
    assert len(rows) == 2
    summary = {r[2]: r for r in dashboard.summary_rows(rows, ["inductor", "solder"])[1:]}
    # solder: speedups 2.5 and 4 (geomean sqrt(10)), against inductor 0.8 and 0.5, compile
    # (8 + 4) / 2, memory 100/50 and 100/100
    assert summary["solder"][4] == "2/2"
    assert summary["solder"][5] == f"{10 ** 0.5:.2f}x"
    assert summary["solder"][6] == f"{0.4 ** 0.5:.2f}x"
    assert summary["solder"][7] == "6.00 s"
    assert summary["solder"][8] == f"{2 ** 0.5:.2f}x"
    assert summary["inductor"][6] == "-"
    text = dashboard.render(meta, rows)
    assert "NVIDIA H100" in text and "| timm.m2 | inference | solder | ok | 2.00 | 4.00x" in text


def test_a_suite_case_runs_through_the_bench_and_merges(tmp_path):
    from solder.bench import cli
    out = tmp_path / "run.json"
    rc = cli.main(["--suite", "dashboard", "--cases", "transformers.bert.inference",
                   "--backends", "eager,solder", "--quick", "--json", str(out)])
    assert rc == 0
    md = tmp_path / "dash.md"
    assert dashboard.main([str(out), "-o", str(md)]) == 0
    assert "| transformers | inference | solder | 1 | 1/1 |" in md.read_text()
