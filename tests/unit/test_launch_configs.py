"""Launch configs in Triton's interpreter: rows of a looped reduction share a program."""
from solder.codegen.launch_configs import candidates, exact_cover


def test_interpreter_looped_reduction_takes_rows_together():
    # 192 column sums over a symbolic number of rows: one program per row took a dynamic
    # GPT-2's backward 10 s a call on the interpreter
    (cfg,) = candidates(True, False, True, 192, 32, interp=True)
    assert cfg == {"XBLOCK": 64, "RBLOCK": 32}
    (cfg,) = candidates(True, False, False, 7, 100000, interp=True)
    assert cfg == {"XBLOCK": 1, "RBLOCK": 4096}
    (cfg,) = candidates(True, False, False, 1024, 8192, interp=True)
    assert cfg["XBLOCK"] * cfg["RBLOCK"] <= 16384


def test_interpreter_configs_divide_rows_evenly():
    # so whether a kernel drops its bounds masks does not change
    for x in (1, 3, 64, 96, 192, 1000, 4096):
        for r in (32, 300, 5000):
            (cfg,) = candidates(True, False, False, x, r, interp=True)
            assert x % cfg["XBLOCK"] == 0
    assert exact_cover(True, False, False, 192, 4096) == \
        all(192 % c["XBLOCK"] == 0 and 4096 % c["RBLOCK"] == 0
            for c in candidates(True, False, False, 192, 4096, interp=False))
