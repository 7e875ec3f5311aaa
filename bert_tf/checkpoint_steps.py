"""Where a pretraining run keeps its tf.train checkpoints, and how far they go, read
without TensorFlow so that the harness (`reproduce.partial`) stays TensorFlow-free."""

import os
import re
from typing import Optional


def default_checkpoint_dir(model_dir: str) -> str:
    return os.path.join(model_dir, "checkpoints")


def latest_checkpoint_step(checkpoint_dir: str) -> Optional[int]:
    """The step of the latest checkpoint in `checkpoint_dir`, read from the index file
    tf.train.CheckpointManager keeps there (the trainer numbers checkpoints by step,
    ckpt-<step>); None where there is none."""
    path = os.path.join(checkpoint_dir, "checkpoint")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        match = re.search(r'^model_checkpoint_path: ".*?ckpt-(\d+)"$', f.read(), re.M)
    return int(match.group(1)) if match else None
