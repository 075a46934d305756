"""The memory-timeline tool's arithmetic (solder/bench/memory.py) on a made-up allocator trace:
the peak, what is alive at it, and where each allocation was made."""
from solder.bench.memory import group_key, peak_of, summarize

W = "<solder graph3_backward wrapper>"


def _alloc(addr, size, filename, line, name="call"):
    return {"action": "alloc", "addr": addr, "size": size,
            "frames": [{"filename": "/x/torch/cuda/memory.py", "line": 1, "name": "empty"},
                       {"filename": filename, "line": line, "name": name}]}


def _free(addr):
    return {"action": "free_requested", "addr": addr}


def test_the_peak_and_what_is_alive_at_it():
    trace = [_alloc(1, 100, W, 3), _alloc(2, 50, W, 4), _free(1), _alloc(3, 80, W, 5),
             _alloc(4, 30, W, 5), _free(3), _free(4), _free(99)]   # 99: freed, never seen
    peak, live = peak_of(trace)
    assert peak == 160 and sorted(live) == [2, 3, 4]


def test_allocations_are_grouped_by_the_wrapper_line_that_made_them():
    source = "def call(args):\n    arg0, = args\n    buf0 = torch.empty(4)\n"
    key = group_key(_alloc(1, 8, W, 3)["frames"], {"graph3_backward": source})
    assert key == "graph3_backward line 3: buf0 = torch.empty(4)"
    assert group_key(_alloc(1, 8, "/home/u/model.py", 12, "forward")["frames"]) == \
        "model.py:12 in forward"
    lines = summarize({1: (3 * 2**20, _alloc(1, 0, W, 3)["frames"]),
                       2: (2**20, _alloc(2, 0, W, 3)["frames"]),
                       3: (2**20, _alloc(3, 0, "/m.py", 7, "f")["frames"])},
                      {"graph3_backward": source})
    assert lines[0].split() [:2] == ["4.0", "MiB"] and "x2" in lines[0]
    assert "m.py:7 in f" in lines[1]


def test_a_cpu_call_s_peak_is_read_from_the_profiler_s_allocations():
    import torch

    from solder.bench.memory import cpu_allocations, cpu_group_key

    x = torch.randn(256, 1024)   # 1 MiB each

    def step():
        a = x * 2          # 1 MiB, freed after b
        b = a + 1          # 1 MiB
        del a
        c = b.sum(0)       # 4 KiB
        return c

    peak, live = cpu_allocations(step)
    assert 2 * 2**20 <= peak < 2 * 2**20 + 64 * 1024
    big = sorted(size for size, _ in live.values() if size >= 2**20)
    assert big == [2**20, 2**20]
    # grouped by the Python function (the profiler names its def line) and the ATen op
    keys = sorted(cpu_group_key(frames) for size, frames in live.values() if size >= 2**20)
    line = step.__code__.co_firstlineno
    assert keys == [f"test_bench_memory.py:{line} in step aten::add",
                    f"test_bench_memory.py:{line} in step aten::mul"]


def test_gpu_size_is_refused_for_a_case_with_one_size_on_the_cpu(capsys):
    from solder.bench.memory import main

    assert main(["gelu_chain", "--device", "cpu", "--gpu-size"]) == 2
    assert "one size on the CPU" in capsys.readouterr().out
