"""The tuner's launch timer (runtime/launch.py): on a GPU it ranks launches by their length and
flushes a buffer larger than the L2 cache before each one."""
import pytest
import torch

from solder.runtime.launch import TUNE_TIMED_LAUNCHES, l2_flush_buffer, median_launch_ms

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="times CUDA launches")


def test_the_timer_ranks_longer_launches_slower_and_times_each_after_a_flush():
    device = torch.device("cuda")
    flush = l2_flush_buffer(device)
    assert flush.numel() >= 2 * torch.cuda.get_device_properties(device).L2_cache_size
    launches = []

    def sleep(cycles):
        def launch():
            launches.append(cycles)
            torch.cuda._sleep(cycles)
        return launch
    short = median_launch_ms(sleep(20_000), flush)
    long = median_launch_ms(sleep(200_000), flush)
    assert 0 < short < long
    # one untimed launch, then the timed ones
    assert launches.count(20_000) == launches.count(200_000) == TUNE_TIMED_LAUNCHES + 1
