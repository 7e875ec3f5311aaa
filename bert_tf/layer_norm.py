"""BERT's LayerNorm over the last axis, with its gradient written out.

Keras's LayerNormalization computes moments, rsqrt and the affine map as separate ops
and leaves the gradient to autodiff, which makes many passes over the [B * T, H]
activations. Written out, the backward pass is three reductions and one elementwise
expression:

    x^ = (x - mean(x)) / sqrt(var(x) + eps),   y = gamma * x^ + beta
    g = dy * gamma
    dx = (g - mean(g) - x^ * mean(g * x^)) / sqrt(var(x) + eps)
    dgamma = sum over rows of dy * x^,   dbeta = sum over rows of dy

On a 2-core Intel Xeon with AMX, BERT-Base's train step (batch 32 x 128) ran 1.045x
as fast as with Keras's LayerNormalization in mixed_bfloat16 and 1.038x in float32;
BERT-Tiny's pretraining step 1.03x, within its noise
(results/benchmark/layer_norm_ab_*.txt, layer_norm_pretrain_ab_bf16.txt).
"""

import keras
import tensorflow as tf
from keras import ops


def layer_norm(x, gamma, beta, epsilon: float):
    """[..., H] -> [..., H] in x's dtype, computed in float32 (as Keras does for 16-bit
    inputs, so that bfloat16 training keeps the moments exact to float32)."""

    @ops.custom_gradient
    def forward(x, gamma, beta):
        x32 = ops.cast(x, "float32")
        centered = x32 - ops.mean(x32, axis=-1, keepdims=True)
        inv_std = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
        normed = centered * inv_std  # x^

        def grad(*args, upstream=None):
            if upstream is None:  # the TensorFlow backend passes it positionally
                (upstream,) = args
            dy = ops.cast(upstream, "float32")
            g = dy * gamma
            dx = inv_std * (g - ops.mean(g, axis=-1, keepdims=True)
                            - normed * ops.mean(g * normed, axis=-1, keepdims=True))
            rows = tuple(range(len(x.shape) - 1))
            return ops.cast(dx, x.dtype), ops.sum(dy * normed, axis=rows), ops.sum(dy, axis=rows)

        return ops.cast(normed * gamma + beta, x.dtype), grad

    return forward(x, gamma, beta)


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization (same weights, names and configuration, so every
    checkpoint name map holds) computed by `layer_norm`. Only BERT's form: the last
    axis, with gamma and beta."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
            raise ValueError("LayerNorm supports the last axis with center and scale only, "
                             "without rms_scaling")

    def call(self, inputs):
        # The variables' values, not the variables: a custom gradient over variables
        # must return their gradients separately, and these are inputs like x.
        gamma, beta = tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta)
        return ops.cast(layer_norm(inputs, gamma, beta, self.epsilon), self.compute_dtype)
