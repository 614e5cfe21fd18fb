"""Ctrl-C and SIGTERM as requests to a process that stops its children itself: counted, never raised mid-cleanup.

    with StopSignals() as signals:       # SIGINT and SIGTERM recorded while inside, where their handlers are default
        ...  signals.first               # the first signal's number, or None: stop the children at a checkpoint
        ...  signals.again()             # a later one: kill them now
    raise StoppedBySignal(signals.first)  # SystemExit(128 + signum): no traceback; launch.py adds the resume command

A raised KeyboardInterrupt can land anywhere in the code that stops the children (a second Ctrl-C while it waits or
prints), leaving them orphaned and a traceback on the screen; a flag read where the code is ready for it cannot.
`timeout -s INT` and a terminal's Ctrl-C to a process group deliver one stop twice within milliseconds: a signal within
DUPLICATE_S of the first is that same stop, not the second Ctrl-C that kills.
"""
from __future__ import annotations

import signal
import threading
import time

DUPLICATE_S = 1.0


class StoppedBySignal(SystemExit):
    """Cells stopped by SIGINT or SIGTERM (their checkpoints written, or killed on a second signal): exit status
    128 + signum and no traceback. `signum`: the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


class StopSignals:
    """Records SIGINT and SIGTERM while inside, in the main thread, where nobody else handles them (SIGINT: Python's
    default handler; SIGTERM: the default action); elsewhere it records only what `note` is told."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}

    def __init__(self) -> None:
        self.received: list[tuple[int, float]] = []   # (signum, time.monotonic())
        self.saved: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                if signal.getsignal(signum) == self.DEFAULTS[signum]:
                    self.saved[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        self.saved.clear()

    def _handle(self, signum, frame) -> None:
        self.note(signum)

    def note(self, signum: int) -> None:
        """A stop that arrived some other way (a KeyboardInterrupt raised by a handler not ours)."""
        self.received.append((signum, time.monotonic()))

    @property
    def first(self) -> int | None:
        return self.received[0][0] if self.received else None

    def again(self) -> bool:
        """Whether a second stop arrived, later than DUPLICATE_S after the first."""
        return any(t - self.received[0][1] > DUPLICATE_S for _, t in self.received[1:])

    def name(self) -> str:
        return signal.Signals(self.first).name if self.first is not None else "no signal"
