"""All-or-nothing file writes: the one home of "write to a temporary file, then rename".

A reader (or a rerun after a crash) sees either the previous file or the whole new one,
never a truncated one. Remote paths (gs://, for TPUs) go through tf.io.gfile, imported only
then, so that TensorFlow-free callers (the harness, the tables) stay TensorFlow-free.
"""

import contextlib
import hashlib
import json
import math
import os
from typing import Iterator

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
