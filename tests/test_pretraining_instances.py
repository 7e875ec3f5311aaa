"""Tests of pieces of bert_tf.pretraining_instances (the whole algorithm is tested through
its output in test_create_pretraining_data.py)."""

import random

import pytest

from bert_tf.pretraining_instances import DataConfig, RandomDocumentPool, truncate_seq_pair


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="mask_rates"):
        DataConfig(mask_rates=(0.8, 0.1, 0.2))
    with pytest.raises(ValueError, match="objective"):
        DataConfig(objective="mlm")


def test_truncate_seq_pair_is_longest_first_from_either_end():
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        a, b = list(range(10)), list(range(100, 104))
        truncate_seq_pair(a, b, 8, rng)
        assert len(a) == 4 and b == [100, 101, 102, 103]  # only A was longer
        fronts += a[0] > 0
        backs += a[-1] < 9
    assert fronts > 150 and backs > 150  # both ends lose tokens
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 5, rng)
    assert len(a) == 3 and len(b) == 2  # a tie is taken from B


def test_random_document_pool_is_bounded_and_moves_on():
    documents = (((f, 0), [[f] * 10]) for f in range(1000))  # 10 tokens each
    pool = RandomDocumentPool(documents, max_documents=5, max_tokens=30)
    sources = [s for s, _, _ in pool._window]
    assert sources == [(0, 0), (1, 0), (2, 0)]  # filled to 30 tokens
    pool.advance(25)
    assert [s for s, _, _ in pool._window] == [(3, 0), (4, 0), (5, 0)]
    rng = random.Random(0)
    assert all(pool.sample(rng, avoid=(4, 0))[0] != (4, 0) for _ in range(50))
