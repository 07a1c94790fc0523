"""This machine, as the caches and the reports name it.

Every measured cache (kernel crossovers, cost models, step models) is keyed by `machine_id`, and two machines that
share a host name (two cloud VMs called `vm`, two containers of one image) must not share a cache: a CPU with
AVX-512 and one with AVX2 pack different products faster, and their s_d/s_t differ. So the id names the CPU model
and the instruction set torch's CPU kernels use, not the host name alone. `host_name` is the same machine in
words, for the header of RESULTS.md.
"""
from __future__ import annotations

import os
import platform
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's "model name" (Linux), else `platform.processor()`, else the machine
    type."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, colon, value = line.partition(":")
            if colon and key.strip() == "model name" and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_isa() -> str:
    """The instruction set torch's CPU kernels use on this machine, e.g. AVX512, AVX2 (`get_cpu_capability`)."""
    return torch.backends.cpu.get_cpu_capability()


def machine_id() -> str:
    """This machine as cache files name it: host, architecture, CPU model and instruction set, and the GPU or the
    CPU threads in use, e.g. `vm-x86_64-AMD_EPYC-AVX2-cpu2` (the thread count last: `costmodel` finds one host's
    caches of other thread counts by the prefix before it)."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu{torch.get_num_threads()}"
    cpu = re.sub(r"\((R|TM)\)", "", cpu_model(), flags=re.IGNORECASE)
    parts = [platform.node(), platform.machine(), cpu, cpu_isa(), device]  # each part free of "-": one field each
    return "-".join(re.sub(r"[^A-Za-z0-9.]+", "_", p).strip("_") or "unknown" for p in parts)


def host_name() -> str:
    """The machine the notebooks ran on, as far as it moves their numbers: CPU model, the instruction set torch's
    CPU kernels use, torch's thread count, and on CUDA the GPU, e.g. "Intel(R) Xeon(R) Processor, AVX512, 2
    threads"."""
    host = f"{cpu_model()}, {cpu_isa()}, {torch.get_num_threads()} threads"
    return f"{host}; GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else host


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` set for the block (inherited by every process it starts meanwhile:
    kernels, workers), and as it was after."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


TIMING_ENV = "SPECTREE_TIMING"  # "smoke": the quick profile's brief machine measurements (`smoke_timing`)


def smoke_timing() -> bool:
    """Whether this process measures the machine in smoke mode ($SPECTREE_TIMING=smoke, set by the quick profile's
    `run_all:`): the kernel crossovers and the cost model's forwards timed briefly, the step model fitted on
    `stepmodel.SMOKE_FIT`, PCT's s_d/s_t from one round — a smoke run's rough numbers, cached under names of their
    own ("-smoke"), so that a full run never reads them nor a smoke run overwrites a full one's."""
    from spectree.core.errors import SpectreeError

    mode = os.environ.get(TIMING_ENV, "full")
    if mode not in ("full", "smoke"):
        raise SpectreeError(f"{TIMING_ENV} must be 'full' or 'smoke', got {mode!r}")
    return mode == "smoke"
