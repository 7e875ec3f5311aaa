"""What the data directory holds, checked before anything runs.

glue_suite reads the task files itself. The planner only asks which of a split's
candidate files (`glue_suite.tasks.TaskSpec.files`, official first) exists, so that a
run without its data is recorded as n/a with the reason instead of being started, and
how large the pretraining corpus is, for the estimates.
"""

import glob
import os
from typing import Optional

from glue_suite.tasks import get_task


def find_data(data_dir: str, task: str, split: str) -> tuple:
    """(path, note) of the first candidate file of the split that exists, or (None, None).
    `split` is a TaskSpec.files key ("train", "dev", "dev_matched", "test_matched")."""
    for candidate in get_task(task).files.get(split, ()):
        if os.path.isfile(os.path.join(data_dir, candidate.path)):
            return candidate.path, candidate.note
    return None, None


def find_train(data_dir: str, task: str) -> tuple:
    return find_data(data_dir, task, "train")


def find_dev(data_dir: str, task: str) -> tuple:
    """The split that picks the learning rate: the first evaluation split (MNLI: matched)."""
    return find_data(data_dir, task, get_task(task).eval_splits[0])


def missing_data(data_dir: str, task: str, train_task: Optional[str] = None) -> Optional[str]:
    """'no QQP data' / 'no QNLI train data', or None when the task can run."""
    train, _ = find_train(data_dir, train_task or task)
    dev, _ = find_dev(data_dir, task)
    name = get_task(task).display_name
    if train is None and dev is None:
        return f"no {name} data"
    if train is None:
        return f"no {get_task(train_task or task).display_name} train data"
    if dev is None:
        return f"no {name} dev data"
    return None


def corpus_bytes(data_dir: str, patterns) -> Optional[int]:
    """Total size of the files the globs (under DATA_DIR/pretraining) match; None when a
    glob matches nothing."""
    files = set()
    for pattern in patterns:
        matches = [p for p in glob.glob(os.path.join(data_dir, "pretraining", pattern))
                   if os.path.isfile(p)]
        if not matches:
            return None
        files.update(matches)
    return sum(os.path.getsize(p) for p in files)
