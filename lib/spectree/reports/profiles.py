"""A profile's file, params/<profile>.yaml: its notebooks' parameters ({notebook stem: {parameter: value}}) and,
under `run_all:`, how `run_all.sh` runs them (`RunSettings`)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterator, Optional

import yaml

from spectree.core.errors import SpectreeError
from spectree.core.machine import TIMING_ENV
from spectree.core.paths import home
from spectree.core.workers import ENV as WORKERS_ENV

PROFILES = ("quick", "default", "paper")
RUN_KEY = "run_all"  # a profile file's settings of the run itself, beside its notebooks' parameters


def profile_file(profile: str) -> dict:
    if profile not in PROFILES:
        raise SpectreeError(f"unknown profile '{profile}': use one of {PROFILES}")
    return yaml.safe_load((home() / "params" / f"{profile}.yaml").read_text()) or {}


def profile_params(profile: str) -> dict[str, dict]:
    """{notebook stem: its parameters} of a profile."""
    return {k: v for k, v in profile_file(profile).items() if k != RUN_KEY}


@dataclass(frozen=True)
class RunSettings:
    """How a profile's notebooks are run (its file's `run_all:` mapping): `kernel` "fresh" (one kernel per notebook)
    or "shared" (`notebook_kernel.SharedKernel`: one for the run, reset between notebooks); `workers` sets
    $SPECTREE_WORKERS for the run (`core.workers`: 1 keeps untimed work in the kernel, where a pool's start-up
    would cost more than small jobs gain); None leaves it as it is; `timing` "full" or "smoke" sets
    $SPECTREE_TIMING (`core.machine.smoke_timing`: short machine measurements, cached apart from full ones)."""

    kernel: str = "fresh"
    workers: Optional[int] = None
    timing: str = "full"

    def environment(self) -> dict[str, str]:
        return {TIMING_ENV: self.timing, **({WORKERS_ENV: str(self.workers)} if self.workers is not None else {})}


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` set for the block, as it was after."""
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


def run_settings(profile: str) -> RunSettings:
    found = profile_file(profile).get(RUN_KEY) or {}
    unknown = set(found) - {f.name for f in fields(RunSettings)}
    if unknown or found.get("kernel", "fresh") not in ("fresh", "shared") or not (
            found.get("workers") is None or isinstance(found["workers"], int) and found["workers"] >= 1) or \
            found.get("timing", "full") not in ("full", "smoke"):
        raise SpectreeError(f"params/{profile}.yaml: bad {RUN_KEY} settings {found!r}: use kernel: fresh|shared, "
                            f"workers: a whole number >= 1, timing: full|smoke")
    return RunSettings(**found)


__all__ = ["PROFILES", "RUN_KEY", "profile_file", "profile_params", "RunSettings", "environment", "run_settings"]
