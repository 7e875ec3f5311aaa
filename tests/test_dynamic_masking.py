"""Tests of bert_tf.dynamic_masking: the masks' statistics, and use in the input pipeline."""

import collections
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.dynamic_masking import DynamicMasking
from bert_tf.pretraining_dataset import instance_to_example, make_pretraining_dataset
from bert_tf.pretraining_instances import Instance

VOCAB_SIZE, PAD, CLS, SEP, MASK = 1000, 0, 2, 3, 4
T, P = 128, 20


def packed_batch(batch_size, seed=0):
    """Unmasked [CLS] A [SEP] B [SEP] records of random lengths, as numpy [B, T]."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch_size, T), np.int32)
    mask = np.zeros((batch_size, T), np.int32)
    segments = np.zeros((batch_size, T), np.int32)
    for i in range(batch_size):
        n = rng.integers(5, T + 1)
        a_end = rng.integers(2, n - 2)
        ids[i, :n] = rng.integers(10, VOCAB_SIZE, n)
        ids[i, [0, a_end, n - 1]] = [CLS, SEP, SEP]
        mask[i, :n] = 1
        segments[i, a_end + 1:n] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype(np.int32)}


_traced = {}


def apply(masking, batch, seed=(1, 2)):
    function = _traced.setdefault(masking, tf.function(masking))  # trace once per shape
    outputs = function({k: tf.constant(v) for k, v in batch.items()},
                       tf.constant(seed, tf.int64))
    return {k: v.numpy() for k, v in outputs.items()}


def make_masking(**kwargs):
    return DynamicMasking(VOCAB_SIZE, MASK, [CLS, SEP, PAD], max_predictions_per_seq=P,
                          **kwargs)


def test_masks_follow_the_rule_and_rates():
    batch = packed_batch(600)
    out = apply(make_masking(), batch)
    ids, lengths = batch["input_ids"], batch["input_mask"].sum(1)
    assert out["input_ids"].shape == (600, T) and out["masked_lm_positions"].shape == (600, P)
    assert out["masked_lm_weights"].dtype == np.float32
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):
        np.testing.assert_array_equal(out[name], batch[name])

    weights, positions = out["masked_lm_weights"], out["masked_lm_positions"]
    k = weights.sum(1).astype(int)
    selectable = lengths - 3
    # tf-text's count: ceil(selectable * rate) in float32, at most P; weights 1s then 0s.
    expected = np.ceil(selectable.astype(np.float32) * np.float32(0.15))
    np.testing.assert_array_equal(k, np.minimum(P, expected))
    np.testing.assert_array_equal(weights, np.arange(P) < k[:, None])
    assert 0.14 < k.sum() / selectable.sum() < 0.17
    changed = out["input_ids"] != ids
    for i in range(len(ids)):
        p = positions[i, :k[i]]
        assert np.all(np.diff(p) > 0) and np.all(p < lengths[i])
        assert not np.isin(ids[i, p], [CLS, SEP, PAD]).any()
        np.testing.assert_array_equal(out["masked_lm_ids"][i, :k[i]], ids[i, p])
        assert not changed[i, np.setdiff1d(np.arange(T), p)].any()  # only picks change
    assert not out["masked_lm_positions"][weights == 0].any()
    assert not out["masked_lm_ids"][weights == 0].any()

    shown = np.take_along_axis(out["input_ids"], positions, 1)[weights > 0]
    labels = out["masked_lm_ids"][weights > 0]
    is_mask, is_same = shown == MASK, shown == labels
    other = ~is_mask & ~is_same
    # ~10k predictions: the standard error of a 10% rate is 0.3%.
    assert abs(is_mask.mean() - 0.8) < 0.015
    assert abs(is_same.mean() - 0.1) < 0.012 and abs(other.mean() - 0.1) < 0.012
    assert abs(shown[other].mean() / VOCAB_SIZE - 0.5) < 0.06  # uniform over the vocab


@pytest.mark.parametrize("rates", [(1.0, 0.0, 0.0), (0.0, 0.2, 0.8)])
def test_other_rates(rates):
    out = apply(make_masking(mask_rates=rates), packed_batch(300, seed=1))
    m = out["masked_lm_weights"] > 0
    shown = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1)[m]
    labels = out["masked_lm_ids"][m]
    same = shown == labels  # a random id equals the label 1/1000 of the time
    np.testing.assert_allclose([(shown == MASK).mean(), (same & (shown != MASK)).mean()],
                               rates[:2], atol=0.02)


def test_short_rates_and_the_cap():
    out = apply(make_masking(masked_lm_prob=0.5), packed_batch(50, seed=2))
    lengths = packed_batch(50, seed=2)["input_mask"].sum(1)
    np.testing.assert_array_equal(out["masked_lm_weights"].sum(1),
                                  [min(P, math.ceil((n - 3) * 0.5)) for n in lengths])


def test_masks_are_a_function_of_the_seed():
    batch, masking = packed_batch(100, seed=4), make_masking()
    a, b, c = (apply(masking, batch, seed) for seed in [(1, 2), (1, 2), (1, 3)])
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert (a["masked_lm_positions"] != c["masked_lm_positions"]).any(axis=1).mean() > 0.9
    # Sequences of the same length get different positions within one batch.
    same = np.tile(batch["input_ids"][:1], (20, 1)), np.tile(batch["input_mask"][:1], (20, 1))
    out = apply(masking, {"input_ids": same[0], "input_mask": same[1]})
    assert len({row.tobytes() for row in out["masked_lm_positions"]}) == 20


def test_bad_rates_are_refused():
    with pytest.raises(ValueError, match="mask_rates"):
        make_masking(mask_rates=(0.8, 0.1, 0.2))


def write_unmasked_records(path, batch):
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(len(batch["input_ids"])):
            n = batch["input_mask"][i].sum()
            instance = Instance(batch["input_ids"][i, :n].tolist(),
                                batch["segment_ids"][i, :n].tolist(), [], [],
                                int(batch["next_sentence_labels"][i, 0]))
            writer.write(instance_to_example(instance, T, P).SerializeToString())


def test_in_the_input_pipeline(tmp_path):
    """Unmasked records -> make_pretraining_dataset(batch_transform=...): the same masks
    for the same seed, new masks each time training sees a record again."""
    path = str(tmp_path / "unmasked.tfrecord")
    write_unmasked_records(path, packed_batch(64, seed=3))

    def positions(seed, is_training=False, num_batches=4):
        ds = make_pretraining_dataset(path, 16, T, P, is_training, seed=seed,
                                      batch_transform=make_masking())
        batches = list(ds.take(num_batches))
        assert batches[0]["input_ids"].shape == (16, T)
        assert batches[0]["masked_lm_positions"].dtype == tf.int32
        return np.concatenate([b["masked_lm_positions"].numpy() for b in batches])

    first = positions(seed=5)
    np.testing.assert_array_equal(first, positions(seed=5))
    assert (first != positions(seed=6)).any(axis=1).mean() > 0.9

    # Training: a record seen again (a later epoch) is masked anew. Records are
    # recognised by their length and A/B split.
    ds = make_pretraining_dataset(path, 64, T, P, True, seed=7,
                                  batch_transform=make_masking())
    seen = collections.defaultdict(list)
    for b in ds.take(8):  # 8 epochs' worth
        for i in range(64):
            key = (b["input_mask"].numpy()[i].sum(), b["segment_ids"].numpy()[i].sum())
            seen[key].append(b["masked_lm_positions"].numpy()[i].tobytes())
    repeats = [masks for masks in seen.values() if len(masks) > 1]
    assert len(repeats) > 50
    assert np.mean([masks[0] == masks[1] for masks in repeats]) < 0.1


def test_masks_survive_an_iterator_checkpoint(tmp_path):
    """What the trainer's exact resumption needs: a restored input pipeline continues
    with the masks the uninterrupted one would have made."""
    path = str(tmp_path / "unmasked.tfrecord")
    write_unmasked_records(path, packed_batch(64, seed=8))
    dataset = make_pretraining_dataset(path, 16, T, P, True, seed=3,
                                       batch_transform=make_masking())
    iterator = iter(dataset)
    next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    expected = [next(iterator)["masked_lm_positions"].numpy() for _ in range(3)]

    restored = iter(dataset)
    tf.train.Checkpoint(iterator=restored).restore(saved)
    for want in expected:
        np.testing.assert_array_equal(next(restored)["masked_lm_positions"].numpy(), want)


def test_each_input_pipeline_masks_with_its_own_seeds(tmp_path):
    """Hosts reading their own parts of the data must not draw the same masks: each
    pipeline has its own seed stream; one pipeline keeps the run's seed."""
    path = str(tmp_path / "unmasked.tfrecord")
    write_unmasked_records(path, packed_batch(64, seed=9))
    with_seed = lambda batch, seed: {**batch, "mask_seed": seed}  # noqa: E731

    def seeds(pipeline):
        ds = make_pretraining_dataset(path, 4, T, P, True, seed=5, pipeline=pipeline,
                                      batch_transform=with_seed)
        return np.stack([b["mask_seed"].numpy() for b in ds.take(4)])

    first, second = seeds((0, 2)), seeds((1, 2))
    assert not set(map(tuple, first)) & set(map(tuple, second))
    expected = tf.data.Dataset.random(seed=5).batch(2).take(4)
    np.testing.assert_array_equal(seeds((0, 1)), np.stack(list(expected.as_numpy_iterator())))
