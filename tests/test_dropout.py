"""bert_tf.dropout: BERT's dropout from 16-bit draws."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import dropout


def test_the_applied_rate_is_the_configs_within_its_resolution():
    for rate in (0.1, 0.15, 0.5, 0.01):
        assert abs(dropout.keep_threshold(rate) / 2 ** 16 - rate) <= 2 ** -17


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_drops_at_the_rate_and_keeps_the_expectation(dtype):
    n, rate = 1_000_003, 0.1  # odd: one 16-bit draw of the last word is left over
    x = tf.ones([n], dtype)
    y = dropout.dropout(x, rate, tf.constant([7, 11], tf.int32)).numpy().astype("float64")
    applied = dropout.keep_threshold(rate) / 2 ** 16
    dropped = np.mean(y == 0)
    sigma = math.sqrt(applied * (1 - applied) / n)
    assert abs(dropped - applied) < 5 * sigma
    kept = y[y != 0]
    # Every kept element is scaled by 1 / (1 - applied rate), in the input's precision.
    expected = float(tf.cast(1 / (1 - applied), dtype))
    np.testing.assert_array_equal(kept, expected)
    assert abs(y.mean() - 1) < 5 * sigma * expected + abs(expected * (1 - applied) - 1)


def test_draws_are_independent_across_positions_and_words():
    # The two halves of a 32-bit word decide neighbouring elements: their keep decisions
    # must not be correlated (nor those of the words' neighbours).
    n, rate = 2_000_000, 0.5
    y = dropout.dropout(tf.ones([n]), rate, tf.constant([1, 2], tf.int32)).numpy() != 0
    even, odd = y[0::2].astype(float), y[1::2].astype(float)
    sigma = 1 / math.sqrt(n / 2)
    assert abs(np.corrcoef(even, odd)[0, 1]) < 5 * sigma
    assert abs(np.corrcoef(odd[:-1], even[1:])[0, 1]) < 5 * sigma


def test_gradient_is_the_mask_times_the_scale():
    x = tf.random.stateless_normal([64, 33], seed=[3, 4])
    seed = tf.constant([5, 6], tf.int32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dropout.dropout(x, 0.2, seed)
    grad = tape.gradient(y, x)
    scale = 1 / (1 - dropout.keep_threshold(0.2) / 2 ** 16)
    np.testing.assert_allclose(grad.numpy(), (y.numpy() != 0) * scale, rtol=1e-6)


def test_layer_is_seeded_trains_only_and_traces_unknown_shapes():
    layer_a, layer_b = dropout.Dropout(0.1, seed=3), dropout.Dropout(0.1, seed=3)
    x = tf.ones([4, 9, 17])
    np.testing.assert_array_equal(layer_a(x, training=False), x)
    first = layer_a(x, training=True)
    np.testing.assert_array_equal(first, layer_b(x, training=True))  # same seed, same mask
    assert not np.array_equal(first, layer_a(x, training=True))  # the generator advances

    layer = dropout.Dropout(0.3, seed=1)
    traced = tf.function(lambda t: layer(t, training=True),
                         input_signature=[tf.TensorSpec([None, None], tf.float32)])
    for shape in ([5, 7], [6, 8]):
        out = traced(tf.ones(shape)).numpy()
        assert out.shape == tuple(shape)
        scale = np.float32(1 / (1 - dropout.keep_threshold(0.3) / 2 ** 16))
        assert set(np.unique(out)) == {0.0, scale}


def test_layer_round_trips_through_its_config():
    layer = dropout.Dropout(0.25, seed=9, name="d")
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(clone) is dropout.Dropout and clone.rate == 0.25


def test_tpus_keep_keras_dropout(monkeypatch):
    assert not dropout._on_tpu()  # the default strategy here
    x = tf.ones([8, 16])
    ours, keras_layer = dropout.Dropout(0.1, seed=5), keras.layers.Dropout(0.1, seed=5)
    monkeypatch.setattr(dropout, "_on_tpu", lambda: True)
    np.testing.assert_array_equal(ours(x, training=True), keras_layer(x, training=True))
    monkeypatch.setattr(dropout, "_on_tpu", lambda: False)
    assert not np.array_equal(ours(x, training=True), keras_layer(x, training=True))
