"""Was the machine busy while we timed? The CPU that other processes used during a timed span.

Speed rows are ratios of wall times taken in one run, so a neighbour that takes a core away for part of the run
bends them: on this 2-core host, a loaded run once printed a 2.3× that meant nothing. `OtherLoad` reads the
machine's busy CPU time (Linux `/proc/stat`) and this process's own (`time.process_time`, every thread) at both
ends of a span; the difference, over the wall time, is how many cores the rest of the machine used meanwhile.
Elsewhere (no `/proc/stat`) it reports nothing (NaN) and warns about nothing.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Optional

STAT = Path("/proc/stat")
BUSY_CORES = 0.25  # other processes using more than this many cores on average make a run's timings suspect
# set (to 1) by the test command, which runs two test processes side by side: a cached cost or step model timed
# then reads as busy, and without it every notebook of the end-to-end run would time it again
REUSE_BUSY = "SPECTREE_REUSE_BUSY_TIMINGS"


def machine_busy_seconds(stat: Path = STAT) -> Optional[float]:
    """CPU seconds the whole machine has spent busy since boot (user, nice, system, irq, softirq, steal), or None
    where `/proc/stat` cannot be read."""
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """`with OtherLoad() as load: ...` then `load.cores`: the cores other processes used on average during the
    block (NaN where unknown). The clock ticks are 10 ms, so a block of well under a second reads coarsely."""

    def __init__(self, stat: Path = STAT):
        self.stat, self.cores = stat, math.nan

    def __enter__(self) -> "OtherLoad":
        self._start = (machine_busy_seconds(self.stat), time.process_time(), time.perf_counter())
        return self

    def __exit__(self, *exc) -> None:
        busy, own, wall = machine_busy_seconds(self.stat), time.process_time(), time.perf_counter()
        if busy is None or self._start[0] is None or wall <= self._start[2]:
            return
        others = (busy - self._start[0]) - (own - self._start[1])
        self.cores = max(0.0, others / (wall - self._start[2]))


def trusted(timed) -> bool:
    """Whether a cached timing (a cost model or step model, each with `plausible`) is used rather than measured
    again: when plausible, or, where the environment says so (`REUSE_BUSY`, which `run_tests.sh` sets; the suite
    checks behaviour, never speed), also when marked busy. The mark stays on the cache, so a run without it
    measures again."""
    return timed.plausible or os.environ.get(REUSE_BUSY, "") not in ("", "0")


def busy_warning(cores: list[float], seconds: list[float], threshold: float = BUSY_CORES) -> Optional[str]:
    """The warning for timed spans of `seconds` during which other processes used `cores` (NaN: unknown), or None
    if the machine was quiet: their time-weighted mean (a short span reads coarsely) against `threshold`."""
    known = [(c, s) for c, s in zip(cores, seconds) if not math.isnan(c) and s > 0]
    wall = sum(s for _, s in known)
    if not wall:
        return None
    mean = sum(c * s for c, s in known) / wall
    if mean <= threshold:
        return None
    return (f"the machine was busy while this benchmark ran: other processes used {mean:.2f} cores on average "
            f"(bar: {threshold:.2f}); its timings and speed ratios are unreliable — rerun on a quiet machine")


__all__ = ["BUSY_CORES", "OtherLoad", "REUSE_BUSY", "busy_warning", "machine_busy_seconds", "trusted"]
