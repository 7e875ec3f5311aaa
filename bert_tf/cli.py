"""The error boundary of every command line: an expected failure is one line, a bug a traceback.

Library code raises `InputError(path, line, message)` when an input is not what it needs
(a malformed row, a truncated checkpoint, records made for other flags, an output
directory that cannot be written). Each `python -m ...` entry point ends with
`run_main(main)`, which prints such an error as

    error: FILE[:LINE]: what was found, what was expected

on stderr and exits 2 (as argparse does for a bad flag). An OSError that names its file
(permission denied, disk full, no such file) is an input problem too and prints the same
way. Every other exception is a bug and keeps its traceback.

InputError is a ValueError (an input with the wrong value), so code and tests that catch
ValueError keep working; `MissingInputError` (an absent input) is also a
FileNotFoundError. glue_suite's `DataFormatError` (a malformed row) and `MissingDataError`
(an absent benchmark file) are InputErrors: callers catch the narrow or the general
type. The `check_*` functions here validate outputs before a command does any work,
`import_keras_without_extras` keeps a command's start-up short, and `StopSignals` lets a
long loop stop where it can resume.
"""

import atexit
import errno
import gc
import os
import signal
import sys
import threading
from typing import Callable, NoReturn, Optional, Union

EXIT_INPUT_ERROR = 2

# Libraries Keras 3 imports whenever they are installed, for features no command here uses:
# its scikit-learn wrappers (scikit-learn pulls SciPy), its DataFrame inputs (pandas), its
# image gallery (matplotlib) and its notebook display (IPython): 2 s of every command's
# start-up on an idle 2-core CPU (glue_suite.run's: 4.7 -> 2.7 s, results/benchmark/README.md),
# a tenth of the training steps of a 2,000-sentence SST-2 epoch.
KERAS_EXTRAS_UNUSED = ("sklearn", "pandas", "matplotlib", "IPython")


class InputError(ValueError):
    """An input is not what the command needs.

    Args:
        path: the file (or directory, or glob) at fault; None when there is none, e.g. an
            uninstalled default.
        line: its 1-based line number, a location such as "question 'q7'", or None.
        message: what was found and what was expected.
    """

    def __init__(self, path: Optional[str], line: Union[int, str, None], message: str):
        self.path, self.line, self.message = path, line, message
        super().__init__(message)

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if isinstance(self.line, int):
            return f"{self.path}:{self.line}: {self.message}"
        if self.line:
            return f"{self.path}: {self.line}: {self.message}"
        return f"{self.path}: {self.message}"


class MissingInputError(InputError, FileNotFoundError):
    """An input file or directory is absent: `MissingInputError(path, message)`; also a
    FileNotFoundError with that filename, for callers that catch that."""

    def __init__(self, path: str, message: str):
        super().__init__(path, None, message)
        self.errno, self.strerror, self.filename = errno.ENOENT, message, path


class StopSignals:
    """SIGTERM (a scheduler's stop, a cloud VM's preemption notice, `reproduce.all` stopping
    its runs) and Ctrl-C, taken as requests that a long loop honours at its next safe point
    instead of dying mid-step: `bert_tf.trainer` saves a checkpoint after the running step
    and stops. A second Ctrl-C stops at once, as usual.

        with StopSignals() as stop:
            for ...:
                ...
                if stop.signum:  # save, then leave

    Handlers can only be installed from the main thread; elsewhere, or with enabled=False,
    the signals keep their usual effect and `signum` stays None.
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.signum: Optional[int] = None
        self._previous = {}

    def __enter__(self) -> "StopSignals":
        if self.enabled and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._request)
        return self

    def _request(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C again: now
        self.signum = self.signum or signum

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 143 for SIGTERM, 130 for
        SIGINT."""
        return 128 + self.signum


def error_line(error: BaseException) -> Optional[str]:
    """The one line an expected failure prints; None for a bug (keep its traceback)."""
    if isinstance(error, InputError):
        return f"error: {error}"
    if isinstance(error, OSError) and error.filename is not None:
        return f"error: {error.filename}: {error.strerror or error}"
    return None


def run_main(main: Callable[[Optional[list]], Optional[int]],
             argv: Optional[list] = None) -> NoReturn:
    """Calls `main(argv)` and exits with its return code (None: 0); an expected failure
    prints one line (`error_line`) to stderr and exits 2."""
    _exit_without_collecting()
    try:
        code = main(argv)
    except (InputError, OSError) as e:
        line = error_line(e)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_INPUT_ERROR)
    sys.exit(code or 0)


def _exit_without_collecting() -> None:
    """Makes the process's exit skip the interpreter's last garbage collections.

    After the command's work, Python's shutdown runs full collections that walk every
    object still alive, TensorFlow's whole module graph among them: 1.2-1.5 s of a 2-core
    CPU after a bare `import tensorflow`, paid by every command and by each of the dozens
    that `reproduce.all` runs. `gc.freeze()` at exit moves those objects out of the
    collector's sight, so shutdown takes ~0.15 s (results/benchmark/README.md). Nothing is
    lost: atexit handlers (logging, multiprocessing, tempfile) still run, objects are still
    freed by reference counting, and no output here relies on a collector finalizing it
    at exit, which Python never promises: files close in `with` blocks, writers by
    `close()`. Registered at exit, not called here, so that a test calling `run_main` in
    its own process keeps a collectable heap until that process ends.
    """
    atexit.unregister(gc.freeze)  # once, however often run_main is called in a process
    atexit.register(gc.freeze)


def import_keras_without_extras() -> None:
    """Imports Keras (and with it TensorFlow) while KERAS_EXTRAS_UNUSED read as not
    installed; afterwards they import normally again.

    For a command's own process only, since that process's Keras then lacks those features:
    an entry module calls it under `if __name__ == "__main__":` above its other imports.
    A library import (a test, a notebook) leaves Keras as it is.
    """
    if "keras" in sys.modules:
        return
    hidden = [name for name in KERAS_EXTRAS_UNUSED if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # `import name` raises ImportError, as if not installed
    try:
        import keras  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]


def check_output_dir(path: str, flag: str) -> None:
    """Raises InputError unless `path` is a directory that can be written, or can be
    created (its nearest existing ancestor is a writable directory). Creates nothing, so
    a command can check all its outputs before it starts. Remote paths are not checked."""
    _check_writable(path, flag, path)


def check_output_file(path: str, flag: str) -> None:
    """Raises InputError unless `path` can be written (not a directory, in a directory
    that can be written or created)."""
    if "://" not in path and os.path.isdir(path):
        raise InputError(path, None, f"is a directory; {flag} needs a file name")
    _check_writable(os.path.dirname(os.path.abspath(path)), flag, path)


def _check_writable(directory: str, flag: str, given: str) -> None:
    if "://" in directory:
        return
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise InputError(existing, None, f"is a file; {flag} {given} needs a directory there")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(existing, None, f"directory is not writable; {flag} {given} needs "
                                         f"to write there")
