"""Untimed work split over processes: logbooks (`replay.logbook.write_logbook`), the lossless grid
(`speed.hybrids.grid_runs`) and notebook 01's per-draft tables (`analysis.tree_tau`, `analysis.acceptance`) decode
prompts, or drafts, that do not depend on one another, and nothing in them is timed.

On a CPU that work is many small forwards, which a second thread barely speeds up: two one-thread processes decode
about 1.6× as many prompts per second as one two-thread process on the 2-core host (docs/history.md). So each job
runs in one of `worker_count` spawned processes with the parent's threads shared among them, loading the pair by
name (`load_models`) or its own. Timed work never runs here: a speed table's rows must share one process.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence

import torch
from tqdm.auto import tqdm

from spectree.core.errors import SpectreeError
from spectree.core.machine import environment

ENV = "SPECTREE_WORKERS"  # processes for untimed work; unset: one per core on a CPU (at most MAX_WORKERS), 1 on a GPU
MAX_WORKERS = 8


def worker_count(device: Any = "cpu") -> int:
    """Processes for untimed work on `device` (a torch device or its name; None or 'auto': CUDA when present, else
    the CPU, as the commands place a pair): $SPECTREE_WORKERS if set (one clear error if it is not a positive whole
    number), else one per core on a CPU (at most MAX_WORKERS) and one on a GPU."""
    asked = os.environ.get(ENV, "")
    if asked:
        if not asked.isdigit() or int(asked) < 1:
            raise SpectreeError(f"{ENV} must be a positive whole number, got {asked!r}")
        return int(asked)
    if device is None or device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return min(MAX_WORKERS, os.cpu_count() or 1) if torch.device(device).type == "cpu" else 1


_MODELS: tuple = ()  # a worker's (target, draft, tokenizer)


def _start(load: Optional[Callable[[], tuple]], threads: int) -> None:
    global _MODELS
    torch.set_num_threads(threads)
    if load is not None:
        _MODELS = load()


def load_models() -> tuple:
    """The pair this worker process loaded (inside a job of `in_processes`)."""
    return _MODELS


def in_processes(job: Callable, args: Sequence[tuple], workers: int, load: Optional[Callable[[], tuple]] = None,
                 desc: str = "") -> list:
    """[job(*a) for a in args], run in `workers` spawned processes, each calling `load` first where one is given
    (e.g. `functools.partial(load_pair, pair)`; its models: `load_models`; else a job loads what it needs). `job` must be a module-level function; results come back in the
    order of `args`; a job's error is raised here."""
    threads = max(1, torch.get_num_threads() // workers)
    initargs = (load, threads)
    with environment({"TQDM_DISABLE": "1"}):  # read as tqdm loads in each worker: only this process's bar
        return _run_pool(job, args, workers, initargs, desc)


def _run_pool(job: Callable, args: Sequence[tuple], workers: int, initargs: tuple, desc: str) -> list:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), initializer=_start,
                             initargs=initargs) as pool:
        futures = {pool.submit(job, *a): i for i, a in enumerate(args)}
        out: list = [None] * len(futures)
        for f in tqdm(as_completed(futures), total=len(futures), desc=f"{desc} ({workers} processes)", unit="job"):
            out[futures[f]] = f.result()
    return out


def map_jobs(job: Callable, args: Sequence[tuple], device: Any = "cpu", desc: str = "") -> list:
    """[job(*a) for a in args]: here when `worker_count` allows one process, else `in_processes` (each job loads
    its own models)."""
    workers = min(len(args), worker_count(device))
    if workers <= 1:
        return [job(*a) for a in args]
    return in_processes(job, args, workers, desc=desc)
