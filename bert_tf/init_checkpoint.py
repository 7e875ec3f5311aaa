"""`pretrain --init_checkpoint DIR`: continue pretraining from a checkpoint.

Any directory that `checkpoints.read_checkpoint` reads (ours, Hugging Face, Google TF1,
keras-hub) starts the run. The model then has the checkpoint's architecture (no
--config) and weights: the encoder, and the masked-LM / next-sentence heads where the
checkpoint holds them whole. A head it lacks starts from the usual random
initialisation: sentence-embedding checkpoints such as the shipped MiniLM have no MLM
head, so its first held-out loss is near ln(vocab size), and falls as the head learns.

The records must use the checkpoint's vocabulary, since their token ids index its
embedding table: `check_vocabulary` compares --vocab_file and the records'
metadata.json (vocab_size, and vocab_sha256 where it has one) with the checkpoint
before anything is built.

Only a run that starts at step 0 loads the checkpoint (`trainer.Trainer.restore`); a
resumed run restores its own tf.train checkpoint, which already holds everything.
"""

import hashlib
import importlib.metadata
import os

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import DEFAULT_PACKAGE, Checkpoint, default_checkpoint, read_checkpoint
from bert_tf.cli import InputError
from bert_tf.files import file_sha256
from bert_tf.pretraining_dataset import read_metadata
from bert_tf.tokenization import load_vocab


def read_init_checkpoint(directory: str, vocab_file: str | None,
                         record_patterns: list[str]) -> Checkpoint:
    """The checkpoint with whichever pretraining heads it has, after checking that the
    records use its vocabulary.

    Args:
        directory: the checkpoint directory.
        vocab_file: --vocab_file (None: the checkpoint's own).
        record_patterns: comma-separated globs of the run's records (train, phase 2,
            eval), whose directories may hold metadata.json.
    Raises:
        InputError: the vocabularies differ.
    """
    checkpoint = read_checkpoint(directory, heads=None)
    check_vocabulary(checkpoint, vocab_file, record_patterns)
    return checkpoint


def records_metadata(record_patterns: list[str]) -> dict:
    """{path: parsed metadata.json} of the directories that hold the records.
    (`pretraining_dataset.check_records` compares them with --vocab_file when given.)"""
    directories = set()
    for patterns in filter(None, record_patterns):
        for pattern in filter(None, (p.strip() for p in patterns.split(","))):
            directories |= {os.path.dirname(path) for path in tf.io.gfile.glob(pattern)}
    found = dict(read_metadata(directory) for directory in sorted(directories))
    return {path: metadata for path, metadata in found.items() if metadata is not None}


def check_vocabulary(checkpoint: Checkpoint, vocab_file: str | None,
                     record_patterns: list[str]) -> None:
    """Raises InputError (a ValueError), naming both sides, if --vocab_file or a
    records' metadata.json describes a vocabulary other than the checkpoint's."""
    size, sha256 = checkpoint.config.vocab_size, file_sha256(checkpoint.vocab_file)
    problems = []
    given = load_vocab(vocab_file) if vocab_file else None
    if given is not None and given != load_vocab(checkpoint.vocab_file):
        problems.append(f"--vocab_file {vocab_file} ({len(given)} entries) is not the "
                        f"checkpoint's vocabulary")
    for path, metadata in records_metadata(record_patterns).items():
        theirs, their_sha256 = metadata.get("vocab_size"), metadata.get("vocab_sha256")
        if theirs != size or (their_sha256 and their_sha256 != sha256):
            problems.append(f"the records' {path} says vocab_size={theirs}"
                            + (f", vocab_sha256={their_sha256[:12]}..." if their_sha256 else "")
                            + f" (made with {metadata.get('vocab_file')})")
    if problems:
        raise InputError(None, None,
            f"vocabulary mismatch: {'; '.join(problems)}; but the checkpoint "
            f"{checkpoint.directory} has vocab_size={size} ({checkpoint.vocab_file}, "
            f"sha256 {sha256[:12]}...). Make the records with the checkpoint's vocabulary: "
            f"python -m bert_tf.create_pretraining_data --vocab_file {checkpoint.vocab_file}")


def weights_sha256(weights: dict) -> str:
    """sha256 of {our name: float32 array}: the same for the same model in any format."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        value = np.ascontiguousarray(weights[name], np.float32)
        digest.update(f"{name}:{value.shape}\n".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _is_default(directory: str) -> bool:
    try:
        return os.path.samefile(directory, default_checkpoint())
    except (FileNotFoundError, OSError):
        return False


def describe(checkpoint: Checkpoint) -> dict:
    """What pretrain_config.json records of the init checkpoint: the shipped one by
    package name and version, any other by its path relative to the working
    directory; its format, heads, and content hashes."""
    if _is_default(checkpoint.directory):
        where = {"name": f"{DEFAULT_PACKAGE}=={importlib.metadata.version(DEFAULT_PACKAGE)}"}
    else:
        where = {"path": os.path.relpath(checkpoint.directory)}
    return {**where, "format": checkpoint.format, "heads": list(checkpoint.heads),
            "weights_sha256": weights_sha256(checkpoint.weights),
            "vocab_sha256": file_sha256(checkpoint.vocab_file)}
