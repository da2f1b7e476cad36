"""Signals during training: SIGTERM (Slurm's pre-emption and time-limit signal) becomes SystemExit, as Ctrl-C is
KeyboardInterrupt, so that ``mltk.train.loop.fit`` saves its state on either; and a block (an optimizer update)
can hold both until it is done."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class DeferredSignals:
    """While ``fit`` runs: SIGTERM raises SystemExit (as Ctrl-C raises KeyboardInterrupt) so that both save the
    state, and inside ``held()`` both signals wait until the block is done. Main thread only (Python delivers
    signals there); elsewhere it does nothing."""

    def __init__(self) -> None:
        self.active = threading.current_thread() is threading.main_thread()
        self._previous_term = None

    def __enter__(self) -> DeferredSignals:
        if self.active and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._previous_term = signal.signal(signal.SIGTERM, exit_on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous_term is not None:
            signal.signal(signal.SIGTERM, self._previous_term)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        pending: list[int] = []
        handlers = {
            sig: signal.signal(sig, lambda s, _frame: pending.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        for sig in pending[:1]:
            handler = handlers[sig]
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(sig)


def exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)
