"""PTX registers read before any write are defined before ptxas sees them
(solder/runtime/ptx_registers.py; fuzz seed 780169)."""
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from solder.runtime.ptx_registers import (define_undefined_registers,
                                          defining_undefined_registers, undefined_registers)

# the lines of fuzz seed 780169's kernel that ptxas (CUDA 13, sm_90) miscompiled: %rs198 is the
# poison lane of a packed <2 x i8>, written nowhere
PTX = textwrap.dedent("""\
    .visible .entry k0(
    \t.param .u64 .ptr .global .align 1 k0_param_0
    )
    {
    \t.reg .pred \t%p<220>;
    \t.reg .b16 \t%rs<205>;
    \t.reg .b32 \t%r<390>;
    \t.reg .b64 \t%rd<10>;
    \tld.param.b64 \t%rd1, [k0_param_0];
    \tmov.u32 \t%r1, %tid.x;
    \tcvt.u16.u32 \t%rs65, %r1;
    \tadd.s16 \t%rs68, %rs65, 4;
    \tadd.s16 \t%rs83, %rs65, 2;
    \tmov.b32 \t%r75, {%rs65, %rs68};
    \tmov.b32 \t%r384, {%rs83, %rs198};
    \tor.b32 \t%r385, %r75, %r384;
    \tmov.b32 \t%r386, 16646144;
    \tadd.s16x2 \t%r387, %r75, %r386;
    \tmov.b32 \t{%rs199, _}, %r385;
    \tand.b16 \t%rs200, %rs199, 255;
    \tsetp.lt.u16 \t%p218, %rs200, 2;
    \tmov.b32 \t{_, %rs201}, %r387;
    \tsetp.lt.u16 \t%p219, %rs201, 3;
    \tand.pred \t%p2, %p218, %p219;
    \t@%p2 st.global.b32 [ %rd1 + 0 ], { %r1 };
    \tret;
    }
    """)


def test_the_poison_lane_of_a_packed_register_is_found_and_zeroed():
    assert undefined_registers(PTX) == ["%rs198"]
    fixed, regs = define_undefined_registers(PTX)
    assert regs == ["%rs198"]
    assert undefined_registers(fixed) == []
    lines = fixed.split("\n")
    zero = next(i for i, line in enumerate(lines) if "mov.b16 %rs198, 0;" in line)
    # right after the declarations, before the first instruction
    assert lines[zero - 1].strip().startswith(".reg .b64")
    assert "ld.param" in lines[zero + 1]
    # nothing else changed
    assert [line for line in lines if "%rs198, 0" not in line] == PTX.split("\n")


@pytest.mark.parametrize("kind, line", [
    ("r", "\tmov.b32 \t%r9, 0;"), ("rd", "\tmov.b64 \t%rd9, 0;"),
    ("p", "\tsetp.ne.b32 \t%p9, 0, 0;")])
def test_each_register_kind_gets_a_zero_of_its_width(kind, line):
    ptx = PTX.replace("%rs198", f"%{kind}9" if kind != "r" else "%r9")
    ptx = ptx.replace("mov.b32 \t%r384, {%rs83, %r9}", "add.s32 \t%r384, %r9, 1") if kind == "r" else ptx
    if kind == "rd":
        ptx = ptx.replace("mov.b32 \t%r384, {%rs83, %rd9}", "cvt.u32.u64 \t%r384, %rd9")
    if kind == "p":
        ptx = ptx.replace("mov.b32 \t%r384, {%rs83, %p9}", "selp.b32 \t%r384, 1, 0, %p9")
    regs = undefined_registers(ptx)
    assert regs == [f"%{kind}9"]
    fixed, _ = define_undefined_registers(ptx)
    assert undefined_registers(fixed) == []


def test_written_registers_are_left_alone():
    # unpacked halves, predicated writes and a setp's two predicates all count as writes; a
    # store writes no register
    ptx = PTX.replace("\tmov.b32 \t%r384, {%rs83, %rs198};\n", "\tmov.b32 \t%r384, {%rs83, %rs83};\n")
    ptx = ptx.replace("\tand.pred \t%p2, %p218, %p219;\n",
                      "\t@%p218 mov.b32 \t%r5, 1;\n\tsetp.lt.u32 \t%p3|%p4, %r5, 2;\n"
                      "\tand.pred \t%p2, %p3, %p4;\n")
    assert undefined_registers(ptx) == []
    assert define_undefined_registers(ptx) == (ptx, [])


def test_the_hook_chains_the_one_installed_and_is_restored_after_the_last_block():
    from triton import knobs
    calls = []

    def theirs(backend, stages, options, language, capability):
        calls.append("theirs")
    before = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = theirs
    try:
        inside = threading.Event()
        leave = threading.Event()

        def other_thread():
            with defining_undefined_registers():
                inside.set()
                leave.wait(10)
        t = threading.Thread(target=other_thread)
        with defining_undefined_registers():
            t.start()
            inside.wait(10)
            hook = knobs.runtime.add_stages_inspection_hook
        # the other thread is still compiling: the hook stays
        assert knobs.runtime.add_stages_inspection_hook is hook
        stages = {"ptx": lambda src, metadata: PTX}
        hook(None, stages, None, None, 90)
        assert calls == ["theirs"]
        assert undefined_registers(stages["ptx"]("", {})) == []
        leave.set()
        t.join()
        assert knobs.runtime.add_stages_inspection_hook is theirs
    finally:
        knobs.runtime.add_stages_inspection_hook = before


def test_a_kernel_compiled_for_an_nvidia_gpu_goes_through_the_hook(tmp_path):
    # Triton compiles for sm_90 without a GPU (ptxas ships with it); not in the interpreter
    script = textwrap.dedent("""
        import triton, triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from solder.runtime import ptx_registers

        @triton.jit
        def k(out_ptr, n):
            r = tl.arange(0, 128)
            tl.store(out_ptr + r, ((r // 6) % 7 + (r % 6)).to(tl.float32), mask=r < n)

        seen = []
        define = ptx_registers.define_undefined_registers
        ptx_registers.define_undefined_registers = lambda ptx: seen.append(1) or define(ptx)
        src = ASTSource(k, {"out_ptr": "*fp32", "n": "i32"}, constexprs={}, attrs={})
        with ptx_registers.defining_undefined_registers():
            kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32))
        assert seen == [1], seen
        assert ptx_registers.undefined_registers(kernel.asm["ptx"]) == []
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    path = tmp_path / "compile_for_sm90.py"   # @triton.jit reads its source from a file
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                         text=True, timeout=300)
    if run.returncode != 0 and "ptxas" in run.stderr and "not found" in run.stderr:
        pytest.skip("this Triton has no ptxas")
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-3000:]
