"""The benchmark's FLOP count and its output format (timings are never asserted)."""

import re

from bert_tf import benchmark
from bert_tf.config import config_for_size


def test_flops_count_against_hand_count():
    base = config_for_size("base")
    # Per token forward: 2 * (12 layers * (4 * 768^2 + 2 * 768 * 3072)) weights-FLOPs
    # + attention 2 * 12 * 2 * 128 * 768; train = 3x forward.
    per_token = 2 * 12 * (4 * 768 ** 2 + 2 * 768 * 3072) + 2 * 12 * 2 * 128 * 768
    expected = 3 * (per_token * 128 + 2 * 768 ** 2)
    assert benchmark.training_flops_per_example(base, 128, train=True) == expected
    assert abs(expected / 1e9 - 67.1) < 0.1  # ~67 GFLOP per BERT-Base example at seq 128


def test_cli_prints_table_and_ratio(capsys):
    benchmark.run("tiny", seq_length=16, batch_size=4, mode="train", precision="float32",
                  peers=["tfm"], warmup=1, rounds=1, jit_compile=False)
    out = capsys.readouterr().out
    assert re.search(r"^ours\s+\d+\.\d+", out, re.M)
    assert re.search(r"^tfm\s+\d+\.\d+", out, re.M)
    ratio = re.search(r"ratio_vs_best_peer=(\d+\.\d+)$", out.strip())
    assert ratio and float(ratio.group(1)) > 0
