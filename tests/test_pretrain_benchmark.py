"""The pretraining benchmark on a few synthetic records: its output, and that the
tf-models-official pretrainer has as many trainable parameters as ours."""

import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import pretrain_benchmark
from bert_tf.pretraining_dataset import instance_to_example
from bert_tf.pretraining_instances import Instance

VOCAB_SIZE, T, P = 40, 16, 3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain_benchmark")
    with open(root / "vocab.txt", "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                          [f"w{i}" for i in range(VOCAB_SIZE - 5)]) + "\n")
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(root / "train.tfrecord")) as writer:
        for _ in range(32):
            ids = [2] + rng.integers(5, VOCAB_SIZE, T - 3).tolist() + [3, 3]
            segments = [0] * (T // 2) + [1] * (T - T // 2)
            instance = Instance(ids, segments, [1, 4, 7], [5, 6, 7], int(rng.integers(2)))
            writer.write(instance_to_example(instance, T, P).SerializeToString())
    return root


def args_for(data, *extra):
    return ["--size", "tiny", "--train_files", f"{data}/train.tfrecord",
            "--vocab_file", f"{data}/vocab.txt", "--batch_size", "4", "--seq_length", str(T),
            "--max_predictions", str(P), "--steps", "1", "--rounds", "2", *extra]


def test_prints_provenance_contenders_and_ratios(data, capsys):
    pretrain_benchmark.main(args_for(data))
    out = capsys.readouterr().out
    for line in ("command: python -m bert_tf.pretrain_benchmark", "commit:", "date:",
                 "machine:"):
        assert line in out
    for name in ("pretrain", "step_alone", "tfm"):
        assert re.search(rf"^{name}\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+$", out, re.M), name
    for ratio in ("pretrain / step_alone", "pretrain / tfm", "step_alone / tfm"):
        assert re.search(rf"^ratio {ratio} = \d+\.\d+ \(95% CI \d+\.\d+-\d+\.\d+\)$", out,
                         re.M), ratio


def test_tfm_pretrainer_has_as_many_trainable_parameters_as_ours(data, tmp_path):
    args = pretrain_benchmark.build_parser().parse_args(args_for(data))
    trainer, _, step_alone, batch = pretrain_benchmark.ours(args, "float32", str(tmp_path))
    step_alone()
    run, num_parameters = pretrain_benchmark.tfm(trainer.model.config, batch, "float32", 1)
    run()
    ours = sum(int(np.prod(v.shape)) for v in trainer.model.trainable_variables)
    assert num_parameters == ours


def test_ratios_with_both_precisions():
    names = [f"{kind} {p}" for p in ("f32", "bf16") for kind in ("pretrain", "step_alone", "tfm")]
    pairs = pretrain_benchmark.ratio_pairs(names, ["float32", "mixed_bfloat16"])
    assert ("pretrain f32", "tfm f32") in pairs and ("pretrain bf16", "step_alone bf16") in pairs
    assert ("step_alone bf16", "step_alone f32") in pairs and len(pairs) == 9
    assert pretrain_benchmark.ratio_pairs(["pretrain", "step_alone"], ["float32"]) == [
        ("pretrain", "step_alone")]
