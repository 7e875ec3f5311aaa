"""All-or-nothing file writes: the one home of "write to a temporary file, then rename".

A reader (or a rerun after a crash) sees either the previous file or the whole new one,
never a truncated one; `staged_outputs` does the same for a run's set of files in one
directory. Remote paths (gs://, for TPUs) go through tf.io.gfile, imported only
then, so that TensorFlow-free callers (the harness, the tables) stay TensorFlow-free.
"""

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from typing import Iterator, Optional, Sequence

from bert_tf.cli import InputError


def is_remote(path: str) -> bool:
    return "://" in path


def _finite(value):
    """NaN / inf -> None, so that the JSON is strict (json.dump would write NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """`with atomic_path(path) as tmp: write_to(tmp)`, for writers that take a file name:
    `path` is replaced by `tmp` when the block ends without an exception and left as it
    was otherwise. Local paths only."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator:
    """`with atomic_open(path) as f: f.write(...)`: `path` appears complete when the block
    ends without an exception, and is left as it was otherwise.

    Args:
        path: the file to (re)place; a gs:// path is written through tf.io.gfile, whose
            objects appear only when closed.
        mode: "w" (text, UTF-8) or "wb".
    """
    if is_remote(path):
        import tensorflow as tf
        with tf.io.gfile.GFile(path, mode) as f:
            yield f
        return
    with atomic_path(path) as tmp:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


def write_text(path: str, text: str) -> None:
    with atomic_open(path) as f:
        f.write(text)


def json_text(value, sort_keys: bool = False) -> str:
    """The one JSON layout of every record this project writes: indented, UTF-8 kept as
    is, NaN/inf as null, a final newline."""
    return json.dumps(_finite(value), indent=2, sort_keys=sort_keys, ensure_ascii=False,
                      allow_nan=False, default=str) + "\n"


def write_json(path: str, value, sort_keys: bool = False) -> None:
    write_text(path, json_text(value, sort_keys))


def read_json(path: str):
    """The parsed JSON of a file (gs:// too); InputError naming the file and line where it
    is not JSON, e.g. truncated."""
    if is_remote(path):
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as f:
            raw = f.read()
    else:
        with open(path, "rb") as f:
            raw = f.read()
    try:
        return json.loads(raw)
    except UnicodeDecodeError as e:
        raise InputError(path, raw.count(b"\n", 0, e.start) + 1, "not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise InputError(path, e.lineno, f"not valid JSON: {e.msg} (column {e.colno})") from None


def file_sha256(path: str) -> str:
    """Hex sha256 of a local file's bytes (vocabularies, records' provenance)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------
# A run's outputs in one directory: all of them, or none
# ---------------------------------------------------------------------------------------

STAGING = ".staging"  # <directory>/.staging/: the outputs of the run being written
PREVIOUS = "previous-"  # <directory>/previous-<time>/: the outputs they replaced


@dataclasses.dataclass
class Stage:
    """Where a run writes its outputs (`path`) until they move into `directory`; once
    they have, `aside` is where the directory's earlier outputs went (None: there were
    none)."""
    directory: str
    path: str
    aside: Optional[str] = None

    def final(self, path: str) -> str:
        """The path that a file written under `path` has once in place."""
        return os.path.join(self.directory, os.path.relpath(path, self.path))


@contextlib.contextmanager
def staged_outputs(directory: str, last: str, previous: Sequence[str] = ()) -> Iterator[Stage]:
    """`with staged_outputs(run_dir, "metrics.json") as stage:` write every output under
    `stage.path`: they appear in `directory` together when the block ends without an
    exception, and not at all otherwise (the stage is deleted, `directory` left as it was).

    Moving in, the entries named in `previous` (an earlier run's outputs) and any the new
    ones would replace first move to previous-<time>/, `last` first; then the new
    entries move in, `last` last. So `last`, the file that says a run finished, never
    sits beside another run's outputs, even if the process dies in between. Local
    directories only (renames within one file system).

    Args:
        directory: the run's directory; what is not named here (logs, caches) stays.
        last: the staged file that marks the run finished (its record).
        previous: names of entries of `directory` that belong to the earlier run.
    """
    stage = Stage(directory, os.path.join(directory, STAGING))
    shutil.rmtree(stage.path, ignore_errors=True)  # a killed run's partial outputs
    os.makedirs(stage.path)
    try:
        yield stage
        new = sorted(os.listdir(stage.path), key=lambda name: name == last)
        old = [name for name in dict.fromkeys([last, *previous, *new])
               if os.path.lexists(os.path.join(directory, _entry(name)))]
        stage.aside = _set_aside(directory, old) if old else None
        for name in new:
            os.replace(os.path.join(stage.path, name), os.path.join(directory, name))
    finally:
        shutil.rmtree(stage.path, ignore_errors=True)


def _entry(name: str) -> str:
    """`name` if it is an entry of a directory (not a path that leaves it)."""
    if name in ("", ".", "..", STAGING) or os.sep in name or name.startswith(PREVIOUS):
        raise ValueError(f"{name!r} is not an output's name in its run directory")
    return name


def _set_aside(directory: str, names: list) -> str:
    """Moves `names` into a new previous-<local time>/ of `directory`; returns its path."""
    base = os.path.join(directory, PREVIOUS + time.strftime("%Y%m%d-%H%M%S"))
    aside, number = base, 1
    while os.path.lexists(aside):  # two runs ended within a second
        number += 1
        aside = f"{base}-{number}"
    os.makedirs(aside)
    for name in names:
        os.replace(os.path.join(directory, name), os.path.join(aside, name))
    return aside
