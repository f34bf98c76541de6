"""The one exit policy of every ``cscore`` command (docs/concepts.md, "Exit codes"): a user error is one
line and its ``exit_code``, Ctrl-C one line and exit 130; a bug keeps its traceback."""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager

from cscore.errors import CscoreError

RUN_INTERRUPTED = ("nothing finished was lost (the same command resumes: finished runs, cached statistics and "
                   "the checkpoint of an unfinished pass are kept)")


def fail(message: str, code: int, prefix: str = "cscore: error") -> None:
    print(f"{prefix}: {message}", file=sys.stderr)
    sys.exit(code)


@contextmanager
def one_line_errors(interrupted: str | None = None, *, code: int | None = None, also: tuple = (),
                    prefix: str = "cscore: error"):
    """A command's user errors (and ``also``) as one line and their exit_code, or ``code`` for all
    (``CSCORE_DEBUG=1`` keeps the traceback); with ``interrupted``, Ctrl-C is that line, exit 130."""
    try:
        yield
    except (CscoreError, *also) as err:
        if os.environ.get("CSCORE_DEBUG"):
            raise
        fail(str(err), code if code is not None else int(getattr(err, "exit_code", 1)), prefix)
    except KeyboardInterrupt as err:
        if interrupted is None:
            raise
        fail(interrupted_line(err, interrupted), 130)


def interrupted_line(err: KeyboardInterrupt, what: str) -> str:
    """The one line for Ctrl-C: what was kept (notes added on the way out, e.g. a checkpoint)."""
    notes = [str(n) for n in getattr(err, "__notes__", ())]
    return "; ".join(["interrupted", *notes, what])


def _deliver(signum, frame) -> None:
    """The first Ctrl-C: raise the KeyboardInterrupt now, or 10 ms later (again and again) while it is not safe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the exit that follows is not interrupted again
    if unsafe_to_interrupt(frame):
        signal.signal(signal.SIGALRM, _deliver)
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    raise KeyboardInterrupt


def unsafe_to_interrupt(frame) -> bool:
    """An import in progress, or code compiled from a string (exec/eval), where a KeyboardInterrupt can
    abort a C extension's initialisation or kill the process by SIGINT. The outermost frame is not
    looked at: ``python -c`` runs the program as a string."""
    while frame is not None and frame.f_back is not None:
        name = frame.f_code.co_filename
        if name == "<string>" or name.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


@contextmanager
def ctrl_c(program: bool):
    """Ctrl-C anywhere in a command: one line, exit 130. As the program, the first Ctrl-C and the end of
    the command make later ones ignored, so the way out is not cut into a traceback."""
    if program:
        signal.signal(signal.SIGINT, _deliver)
    try:
        yield
    except KeyboardInterrupt as err:
        fail(interrupted_line(err, "nothing finished was lost"), 130)
    finally:
        if program:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.setitimer(signal.ITIMER_REAL, 0)  # a Ctrl-C still waiting to be raised is dropped
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
