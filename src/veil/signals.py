"""SIGTERM and SIGHUP end a `veil` command the way Ctrl-C does: whatever handles SIGINT at that moment (Python's
KeyboardInterrupt, or Ray Tune's graceful stop during a sweep) handles them too, so runs end KILLED instead of
staying RUNNING, and a sweep stops its trials and can be resumed."""

from __future__ import annotations

import signal
import threading
from types import FrameType

TERMINATING = (signal.SIGTERM, signal.SIGHUP)
received: list[int] = []
_installed = False


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM or SIGHUP arrives outside a sweep's graceful stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal.Signals(signum).name}")


def _forward_to_sigint(signum: int, frame: FrameType | None) -> None:
    received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)
    else:
        raise Terminated(signum)


def install() -> None:
    """Route SIGTERM and SIGHUP to the SIGINT path (main thread of a `veil` command only)."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in TERMINATING:
        signal.signal(sig, _forward_to_sigint)
    _installed = True


def reinstall() -> None:
    """Put the handlers back after a library replaced them (`ray.init` makes SIGTERM call sys.exit)."""
    if _installed:
        install()


def exit_code(default: int) -> int:
    """128 + the terminating signal's number when one arrived (143 for SIGTERM), else `default`."""
    return 128 + received[0] if received else default
