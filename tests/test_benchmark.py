"""The benchmarks: FLOP count, output format, that the peers do the same computation
(issue #13), and the timing statistics. Timings themselves are never asserted."""

import contextlib
import re
from unittest import mock

import numpy as np
import pytest

from bert_tf import benchmark, timing, transformer_block
from bert_tf.config import BertConfig, config_for_size

SMALL = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64)


def test_flops_count_against_hand_count():
    base = config_for_size("base")
    # Per token forward: 2 * (12 layers * (4 * 768^2 + 2 * 768 * 3072)) weights-FLOPs
    # + attention 2 * 12 * 2 * 128 * 768; train = 3x forward.
    per_token = 2 * 12 * (4 * 768 ** 2 + 2 * 768 * 3072) + 2 * 12 * 2 * 128 * 768
    expected = 3 * (per_token * 128 + 2 * 768 ** 2)
    assert benchmark.training_flops_per_example(base, 128, train=True) == expected
    assert abs(expected / 1e9 - 67.1) < 0.1  # ~67 GFLOP per BERT-Base example at seq 128


def test_cli_prints_provenance_table_and_ratio_with_interval(capsys):
    result = benchmark.run("tiny", seq_length=16, batch_size=4, mode="train",
                           precision="float32", peers=["tfm"], warmup=1, rounds=2,
                           jit_compile=False)
    out = capsys.readouterr().out
    for line in ("command: python -m bert_tf.benchmark", "commit:", "date:", "machine:"):
        assert line in out
    assert re.search(r"^round 2/2: (ours|tfm) ", out, re.M)
    assert re.search(r"^ours\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+", out, re.M)
    assert re.search(r"^tfm\s+\d+\.\d+", out, re.M)
    line = re.search(r"ratio_vs_best_peer=(\d+\.\d+) \(95% CI (\d+\.\d+)-(\d+\.\d+); "
                     r"best peer by median: tfm\)$", out.strip())
    assert line and float(line.group(2)) <= float(line.group(1)) <= float(line.group(3))
    assert result["best_peer"] == "tfm"


def test_ab_of_ours_times_each_variant_as_built_under_it(capsys):
    """Each variant's model is traced inside its context: a GELU patched in by the second
    variant runs in that model's graph only, and the A/B prints its ratio."""
    traced, gelu = [], transformer_block.gelu

    def marked_gelu(x):
        traced.append(x.shape)
        return gelu(x)

    ratio = benchmark.ab_of_ours(
        "tests/test_benchmark.py",
        {"plain": contextlib.nullcontext,
         "marked": lambda: mock.patch.object(transformer_block, "gelu", marked_gelu)},
        "float32", rounds=2, config=SMALL.replace(max_position_embeddings=128))
    # The marked variant's two blocks, each traced once on its [B * T, I] rows (the rounds
    # reuse the graph); the plain variant never calls it. (`ours` also reads the
    # activation at 1 for its facts.)
    assert [tuple(shape) for shape in traced if len(shape) == 2] == \
        [(32 * 128, SMALL.intermediate_size)] * SMALL.num_hidden_layers
    out = capsys.readouterr().out
    assert "commit:" in out and "machine:" in out
    assert re.search(r"^round 2/2: (plain|marked) ", out, re.M)
    line = re.search(r"^float32: plain / marked time = (\d+\.\d+) "
                     r"\(95% CI (\d+\.\d+)-(\d+\.\d+)\)$", out, re.M)
    assert line and float(line.group(2)) <= float(line.group(1)) <= float(line.group(3))
    assert ratio[1] <= ratio[0] <= ratio[2]


def test_peers_do_the_same_computation():
    """Same parameter count, dropout rates, GELU form and optimizer settings, read back
    from every built model (train mode, float32)."""
    for module in ("tf_keras", "official", "keras_hub", "torch", "transformers"):
        pytest.importorskip(module)
    batch = benchmark.random_batch(SMALL, 2, 8)
    peers = {name: runner(SMALL, batch, "train", "float32", False)
             for name, runner in benchmark.RUNNERS.items()}
    ours = peers["ours"]
    # Encoder with pooler, plus the 2-way head.
    assert ours.num_parameters == SMALL.num_parameters() + 2 * SMALL.hidden_size + 2
    assert ours.facts == {"hidden_dropout": 0.1, "attention_dropout": 0.1,
                          "head_dropout": 0.1, "activation_at_1": 0.841345,  # exact GELU
                          "optimizer": (1e-5, 0.01, 1e-6)}
    for name, peer in peers.items():
        assert peer.num_parameters == ours.num_parameters, name
        assert peer.facts == ours.facts, name
    for peer in peers.values():
        peer.step()  # every step runs


def test_rotation_spread_and_bootstrap_interval():
    assert [timing.rotated(["a", "b", "c"], r) for r in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert timing.spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    rng = np.random.default_rng(0)
    slow = 10 + rng.normal(0, 0.5, 16)
    fast = 1.2 * slow + rng.normal(0, 0.2, 16)  # paired rounds: the noise is shared
    ratio, low, high = timing.bootstrap_ratio(fast, slow)
    assert low < ratio < high and 1.1 < low and high < 1.3
    # Over the best of several denominators.
    assert timing.bootstrap_ratio(fast, slow, 2 * slow)[0] == pytest.approx(
        np.median(fast) / np.median(2 * slow))
    calls = []
    seconds = timing.run_rounds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                rounds=3, log=lambda line: None)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert [len(v) for v in seconds.values()] == [3, 3]
