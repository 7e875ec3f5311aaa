"""Nothing committed holds an absolute path of the machine that made it: not the records,
logs and tables under results/, not the code, not the docs (bert_tf.portable_paths says
what records hold instead). Files git would commit are read as they are on disk."""

import os
import subprocess

import pytest

from bert_tf.portable_paths import machine_paths

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED = ("results", "bert_tf", "glue_suite", "reproduce", "README.md", "BUILD.md",
           "ARCHITECTURE.md")


def committed_files() -> list:
    """Tracked files, and new ones not ignored, under CHECKED."""
    try:
        listed = subprocess.run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard", "--", *CHECKED],
                                capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"git cannot list the files: {e}")
    return sorted({p for p in listed.stdout.split("\0")
                   if p and os.path.isfile(os.path.join(REPO, p))})


def text_of(path: str):
    """The file's text; None for a binary file (images, TensorBoard events)."""
    with open(os.path.join(REPO, path), "rb") as f:
        raw = f.read()
    if b"\0" in raw[:8192]:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_committed_file_holds_a_machine_path():
    files = committed_files()
    assert any(p.startswith("results/") for p in files) and "bert_tf/files.py" in files
    found = []
    for path in files:
        text = text_of(path)
        for number, line in enumerate((text or "").splitlines(), start=1):
            found += [f"{path}:{number}: {hit}" for hit in machine_paths(line)]
    assert not found, (f"{len(found)} absolute paths of this machine (write them with "
                       f"bert_tf.portable_paths): " + "; ".join(found[:20]))
