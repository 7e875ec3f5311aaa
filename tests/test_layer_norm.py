"""bert_tf.layer_norm: the written-out gradient against Keras's LayerNormalization
differentiated by TensorFlow, in float32 and mixed_bfloat16."""

import numpy as np
import pytest
import tensorflow as tf
import keras

from bert_tf.layer_norm import LayerNorm


def _outputs_and_gradients(layer, x, weights):
    """y, dL/dx, dL/dgamma, dL/dbeta for L = sum(y * w), w fixed and uneven so that no
    gradient term cancels."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, "float32") * weights)
    grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
    return [tf.cast(t, "float32").numpy() for t in [y, *grads]]


def _pair(dtype):
    ours = LayerNorm(epsilon=1e-12, dtype=dtype, name="layer_norm")
    keras_ln = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype, name="layer_norm")
    rng = np.random.default_rng(0)
    for layer in (ours, keras_ln):
        layer.build((None, None, 16))
        layer.gamma.assign(rng.normal(1.0, 0.5, 16).astype("float32"))
        layer.beta.assign(rng.normal(0.0, 0.5, 16).astype("float32"))
    ours.set_weights(keras_ln.get_weights())
    return ours, keras_ln


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-4), ("mixed_bfloat16", 2e-2)])
def test_matches_keras_forward_and_backward(dtype, rtol):
    ours, keras_ln = _pair(dtype)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(3.0, 2.0, (2, 5, 16)), dtype=ours.compute_dtype)
    weights = tf.constant(rng.normal(size=(2, 5, 16)), dtype="float32")
    got = _outputs_and_gradients(ours, x, weights)
    want = _outputs_and_gradients(keras_ln, x, weights)
    assert got[0].dtype == want[0].dtype
    for name, a, b in zip(["y", "dx", "dgamma", "dbeta"], got, want):
        # bfloat16: the output and dx are rounded to 8 bits of mantissa (~0.4%) after
        # float32 arithmetic in a different order; compare against each tensor's scale.
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max(), err_msg=name)
    assert ours(x).dtype == keras_ln(x).dtype


def test_the_gradient_is_the_numerical_one():
    layer, _ = _pair("float32")
    x = tf.constant(np.random.default_rng(2).normal(size=(3, 16)), dtype="float64")
    x32 = tf.cast(x, "float32")
    theoretical, numerical = tf.test.compute_gradient(
        lambda v: tf.cast(layer(tf.cast(v, "float32")), "float64"), [x])
    # The layer computes in float32: central differences of step ~1e-3 carry its rounding
    # (~1e-7 relative of outputs ~3) divided by the step, ~3e-4.
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=2e-3)
    assert layer(x32).shape == (3, 16)


def test_same_weights_names_and_config_as_keras():
    ours, keras_ln = _pair("float32")
    assert [v.path for v in ours.weights] == [v.path for v in keras_ln.weights]
    config = ours.get_config()
    assert LayerNorm.from_config(config).get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(ours))
    assert type(restored) is LayerNorm
    with pytest.raises(ValueError, match="last axis"):
        LayerNorm(axis=0)
