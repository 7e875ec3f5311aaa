"""bert_tf.cli.run_main's exit: the heap is frozen when the interpreter shuts down (its last
garbage collections skipped), not before, and a library's earlier atexit handler still
runs after it."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROCESS = """
import atexit, gc
from bert_tf.cli import run_main
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))
print("frozen before:", gc.get_freeze_count() > 0)
for code in (0, 3):
    try:
        run_main(lambda argv: code)
    except SystemExit as e:
        print("exit code", e.code)
print("frozen after run_main:", gc.get_freeze_count() > 0, flush=True)
"""


def test_run_main_freezes_the_heap_at_exit_only():
    done = subprocess.run([sys.executable, "-c", PROCESS], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines() == [
        "frozen before: False", "exit code 0", "exit code 3",
        "frozen after run_main: False",  # a test's own process keeps a collectable heap
        "frozen at exit: True"]
