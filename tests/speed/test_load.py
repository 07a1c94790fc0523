"""The busy-machine meter: other processes' CPU during a timed span, and the warning bench prints for it."""
import math
import subprocess
import sys
import time

import pytest

from spectree.speed.load import STAT, OtherLoad, busy_warning, machine_busy_seconds

linux = pytest.mark.skipif(machine_busy_seconds() is None, reason="needs Linux /proc/stat")


def test_busy_seconds_sum_the_busy_fields_and_unreadable_files_give_none(tmp_path):
    import os

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 4000 50 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert machine_busy_seconds(stat) == pytest.approx((100 + 20 + 30 + 6 + 7 + 8) / os.sysconf("SC_CLK_TCK"))
    assert machine_busy_seconds(tmp_path / "missing") is None
    stat.write_text("intr 1 2 3\n")
    assert machine_busy_seconds(stat) is None
    with OtherLoad(tmp_path / "missing") as load:
        pass
    assert math.isnan(load.cores)


@linux
def test_a_spinning_neighbour_reads_as_load_and_our_own_work_does_not():
    with OtherLoad(STAT) as own:
        end = time.perf_counter() + 0.6
        while time.perf_counter() < end:  # a core of our own: not "other" load
            pass
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        with OtherLoad(STAT) as other:
            time.sleep(1.0)
    finally:
        spinner.kill()
        spinner.wait()
    assert other.cores > 0.6  # the neighbour held about one core
    assert own.cores < other.cores - 0.4


def test_the_warning_weighs_spans_by_their_length_and_speaks_only_past_the_bar():
    assert busy_warning([0.0, 0.1, math.nan], [1.0, 1.0, 1.0]) is None
    assert busy_warning([math.nan], [1.0]) is None and busy_warning([], []) is None
    assert busy_warning([2.0, 0.0], [0.01, 10.0]) is None  # a 10 ms blip of two cores: below the bar over 10 s
    why = busy_warning([0.1, 0.9], [1.0, 3.0])
    assert why is not None and "0.70 cores on average" in why
