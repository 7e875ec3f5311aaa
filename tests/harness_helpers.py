"""Helpers shared by the harness tests (plain functions, not fixtures)."""

import os
import signal
import threading
import time

import pytest

from reproduce.runner import run_plan, stop_child


def run_plan_stopped_once(path, plan, output_dir: str, data_dir: str,
                          timeout_s: float = 60) -> None:
    """Runs the plan and sends this process SIGTERM, with the handler reproduce.all
    installs, once `path` (a pathlib.Path) exists: the plan stops with KeyboardInterrupt."""
    def sigterm_once_there():
        deadline = time.time() + timeout_s
        while not path.exists() and time.time() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop_child)
    try:
        threading.Thread(target=sigterm_once_there, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_plan(plan, output_dir, data_dir, echo=False)
    finally:
        signal.signal(signal.SIGTERM, previous)


def flags(argv) -> dict:
    """A command's --flag value pairs, without the dashes (a bare flag -> True)."""
    flags, key = {}, None
    for token in argv:
        if token.startswith("--"):
            key = token[2:]
            flags[key] = True
        else:
            flags[key] = token
    return flags
