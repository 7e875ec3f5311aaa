"""BERT's dropout with half the random bits: each element's keep decision is a 16-bit
random integer, two to every 32-bit word the generator makes.

Keras's dropout draws a float32 uniform per element (32 random bits). On a 2-core EPYC
with AVX-512 BF16 those draws were 8% of a BERT-Base mixed_bfloat16 train step's op time
(half of them for the attention probabilities' [B, A, T, T]); with two draws per word the
step ran 1.05x as fast in bfloat16 and 1.02x in float32
(results/benchmark/dropout_bits_ab_*.txt).
"""

import keras
import tensorflow as tf

_LEVELS = 2 ** 16  # a draw is uniform on 0 .. 2^16 - 1


def keep_threshold(rate: float) -> int:
    """Draws below it are dropped: round(rate * 2^16). The rate actually applied is
    threshold / 2^16, within 2^-17 of `rate` (0.1 -> 0.1000061), finer than any rate
    a config gives."""
    return round(rate * _LEVELS)


def _seed(seed_generator: keras.random.SeedGenerator) -> tf.Tensor:
    """The generator's next seed as the int32 pair tf.random.stateless_* takes (what
    Keras's own TensorFlow dropout does with it)."""
    seed = seed_generator.next()
    if seed.dtype == tf.int32:
        return seed
    return tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)


def dropout(inputs: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """inputs with each element zeroed with probability keep_threshold(rate) / 2^16 and
    the rest scaled by 2^16 / (2^16 - threshold), so that the expectation is the input's."""
    threshold = keep_threshold(rate)
    size = tf.size(inputs)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None,
                                        maxval=None, dtype=tf.uint32)
    draws = tf.reshape(tf.bitcast(words, tf.uint16), [-1])  # [2 * words]
    if inputs.shape.num_elements() is None or inputs.shape.num_elements() % 2:
        draws = draws[:size]  # an odd count has one draw too many
    keep = tf.reshape(draws >= tf.constant(threshold, tf.uint16), tf.shape(inputs))
    scale = tf.constant(_LEVELS / (_LEVELS - threshold), inputs.dtype)
    return tf.where(keep, inputs * scale, tf.zeros((), inputs.dtype))


def _on_tpu() -> bool:
    """Under a TPUStrategy. 16-bit integer types have not been tried on a TPU (none is
    reachable here), so TPU runs keep Keras's dropout. (Splitting each word into halves
    with uint32 bitwise ops, which every device has, cost as much as the bits saved: on
    CPU the BERT-Base bf16 step ran 1.06x slower than with the bitcast.)"""
    return isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout (same arguments, seed generator and configuration) drawing
    16 bits per element (`dropout`). noise_shape, and TPUs (`_on_tpu`), fall back to
    Keras's own."""

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or self.noise_shape is not None or _on_tpu():
            return super().call(inputs, training=training)
        if self.rate >= 1:
            return tf.zeros_like(inputs)
        return dropout(inputs, self.rate, _seed(self.seed_generator))
