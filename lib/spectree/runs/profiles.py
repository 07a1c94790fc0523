"""A profile's file, params/<profile>.yaml: its notebooks' parameters ({notebook stem: {parameter: value}}) and,
under `run_all:`, how `run_all.sh` runs them (`RunSettings`)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

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


CHOICES = {"kernel": ("fresh", "shared"), "timing": ("full", "smoke")}


def run_settings(profile: str) -> RunSettings:
    found = profile_file(profile).get(RUN_KEY) or {}
    bad = set(found) - {f.name for f in fields(RunSettings)}
    bad |= {k for k, ok in CHOICES.items() if k in found and found[k] not in ok}
    workers = found.get("workers")
    if workers is not None and not (isinstance(workers, int) and workers >= 1):
        bad.add("workers")
    if bad:
        raise SpectreeError(f"params/{profile}.yaml: bad {RUN_KEY} settings {found!r}: use kernel: fresh|shared, "
                            f"workers: a whole number >= 1, timing: full|smoke")
    return RunSettings(**found)


__all__ = ["PROFILES", "RUN_KEY", "profile_file", "profile_params", "RunSettings", "run_settings"]
