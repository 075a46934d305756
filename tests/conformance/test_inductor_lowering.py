"""Inductor's column of the conformance report: its generated wrappers read for ATen calls."""
import json
import logging

from solder.conformance import inductor_lowering as il
from solder.conformance import side_by_side

# The shape of a wrapper inductor prints (trimmed): imports, helper bindings, kernels, calls.
WRAPPER = '''
import torch
from torch._inductor.select_algorithm import extern_kernels
aten = torch.ops.aten
inductor_ops = torch.ops.inductor
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r"""...""")
def call(args):
    arg0_1, = args
    # Topologically Sorted Source Nodes: [sort], Original ATen: [aten.sort]
    buf0 = torch.ops.aten.sort.stable(arg0_1, dim=-1)
    buf3 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
    extern_kernels.mm(buf1, buf2, out=buf3)
    buf4 = aten.linalg_cholesky_ex.default(buf3)
    buf5 = torch.ops.mkldnn._convolution_pointwise(buf3, None)
    buf6 = torch.ops.torch_nn._linear_cross_entropy_batch_chunked.default(buf5, buf3)
    buf7 = torch.ops.inductor.accumulate_grad_.default(buf6, buf3)
    return (reinterpret_tensor(buf3, (16,), (1,), 0), )
'''


def test_calls_in_a_wrapper():
    aten, extern = il.calls_in(WRAPPER)
    # the comment naming aten.sort is not a call; inductor's own helper op is not a fallback
    assert aten == {"sort", "linalg_cholesky_ex", "torch_nn._linear_cross_entropy_batch_chunked"}
    assert extern == {"mm", "_convolution_pointwise"}


def test_classification_words_match_solders():
    assert il.classify_codes([WRAPPER])["lowering"] == "fallback"
    kernels_only = "def call(args):\n    cpp_fused_add_0(arg0_1, buf0)\n    return (buf0, )\n"
    assert il.classify_codes([kernels_only])["lowering"] == "lowered"
    assert il.classify_codes([kernels_only, "extern_kernels.bmm(a, b, out=c)"])["lowering"] \
        == "extern"
    assert il.classify_codes([])["lowering"] == "not-captured"
    summary = il.classify_codes([WRAPPER])
    assert [f["op"] for f in summary["fallbacks"]] == [
        "aten.linalg_cholesky_ex", "aten.sort", "torch_nn._linear_cross_entropy_batch_chunked"]


def test_wrappers_are_collected_from_inductors_loggers_silently(capsys):
    log = logging.getLogger("solder_test_module.__output_code")
    log.artifact_name = "output_code"   # as torch._logging marks an artifact's loggers
    with il.generated_wrappers() as codes:
        log.debug("Output code: \n%s", WRAPPER)
        log.debug("Output code written to: %s", "/tmp/x.py")  # not a wrapper
    log.debug("Output code: \n%s", "after the block")  # not collected
    assert codes == [WRAPPER]
    assert capsys.readouterr().err == ""


def _run(backend, rows):
    return {"backend": backend, "device": "cpu", "dtypes": ["float32"],
            "summary": {"ops": {"passed": len(rows)}},
            "ops": [{"op": op, "outcome": outcome, "lowering": lowering, "fallbacks": []}
                    for op, outcome, lowering in rows]}


def test_side_by_side_names_ops_where_the_first_run_is_worse(tmp_path, capsys):
    ours = _run("solder", [("add", "passed", "lowered"), ("sort", "passed", "fallback"),
                           ("mm", "passed", "extern"), ("qr", "failed", "fallback")])
    theirs = _run("inductor", [("add", "passed", "fallback"), ("sort", "passed", "lowered"),
                               ("mm", "passed", "lowered"), ("qr", "passed", "fallback")])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(ours))
    b.write_text(json.dumps(theirs))
    assert side_by_side.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "| lowered | 1 | 2 |" in out and "| fallback | 2 | 2 |" in out
    assert "sort: fallback" in out and "qr: fails; inductor passed" in out
    assert "mm:" not in out and "add:" not in out  # a library call is not worse than a kernel
