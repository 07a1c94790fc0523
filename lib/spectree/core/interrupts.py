"""Ctrl-C (SIGINT) and SIGTERM noted instead of raised, so that a loop can finish its step, save, and stop."""
from __future__ import annotations

import signal
import threading
from typing import Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """Stopped by a signal (`signum`) after saving what there was to save."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Deferred:
    """`with Deferred() as stop:` — inside, SIGINT and SIGTERM only set `stop.signum`; `stop.check()` raises
    `Interrupted` once one arrived (call it after saving). A second signal interrupts at once. Outside the main
    thread (where Python cannot take signals) it does nothing."""

    def __init__(self):
        self.signum: Optional[int] = None
        self._before: dict[int, object] = {}

    def __enter__(self) -> "Deferred":
        if threading.current_thread() is threading.main_thread():
            self._before = {s: signal.signal(s, self._note) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._before.items():
            signal.signal(s, handler)
        self._before = {}

    def _note(self, signum: int, frame) -> None:
        if self.signum is not None:
            raise Interrupted(signum)
        self.signum = signum

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)
