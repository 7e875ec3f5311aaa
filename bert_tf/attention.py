"""Multi-head self-attention with a padding mask and an optional causal (left-to-right) mask."""

import math

import keras
from keras import ops

from bert_tf.dropout import Dropout
from bert_tf.initializers import TruncatedNormal


def attention_mask(input_mask, causal=False):
    """Boolean mask [B, T, T]: query i may attend to key j.

    Padding keys are hidden from every query; with `causal` a query also cannot see later
    keys (the paper's LTR ablation, kept during fine-tuning).
    """
    keys = ops.cast(input_mask, "bool")[:, None, :]  # [B, 1, T]
    if not causal:
        return ops.broadcast_to(keys, (ops.shape(keys)[0], ops.shape(keys)[2], ops.shape(keys)[2]))
    seq_length = ops.shape(input_mask)[1]
    positions = ops.arange(seq_length)
    left = positions[None, :] <= positions[:, None]  # [T, T] key j <= query i
    return ops.logical_and(keys, left[None])


def as_rows(x):
    """[..., H] -> [N, H]. Every projection multiplies rows: Keras's Dense sends an input of
    rank 3 through tf.tensordot, which builds ~20 shape ops (and as many in the gradient)
    around its one MatMul, all traced at each fine-tuning run's start and executed at each
    step, since length-bucketed inputs have no static shape to fold them with; and a
    Reshape between its MatMul and the bias add kept grappler from fusing the two. The
    product is the same one: tensordot makes this reshape itself (as the original's
    `reshape_to_matrix` did)."""
    return ops.reshape(x, (-1, x.shape[-1]))


class SelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over A heads of size D = H / A.

    Separate query/key/value projections keep a one-to-one map with the original
    checkpoints (`attention/self/{query,key,value}`).

    Args:
        num_heads: number of heads A.
        head_size: width D of one head.
        dropout: dropout on the attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, num_heads, head_size, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        hidden = num_heads * head_size
        dense = lambda name: keras.layers.Dense(
            hidden, kernel_initializer=TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy, name=name)
        self.query, self.key, self.value = dense("query"), dense("key"), dense("value")
        self.output_dense = dense("output")
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value):
            layer.build(input_shape)
        self.output_dense.build(input_shape)
        self.built = True

    def call(self, x, mask, training=None):
        batch, seq_length = ops.shape(x)[0], ops.shape(x)[1]
        hidden = self.num_heads * self.head_size
        rows = as_rows(x)  # [B * T, H]

        def split_heads(t):  # [B * T, H] -> [B, A, T, D]
            t = ops.reshape(t, (batch, seq_length, self.num_heads, self.head_size))
            return ops.transpose(t, (0, 2, 1, 3))

        q, k, v = (split_heads(self.query(rows)), split_heads(self.key(rows)),
                   split_heads(self.value(rows)))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, A, T, T]
        # Softmax in float32 so that bfloat16 training keeps the masked keys at exactly 0.
        scores = ops.cast(scores, "float32") / math.sqrt(self.head_size)
        scores = ops.where(mask[:, None], scores, -1e9)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout_layer(probs, training=training)
        context = ops.matmul(probs, v)  # [B, A, T, D]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, hidden))  # [B * T, H]
        return ops.reshape(self.output_dense(context), (batch, seq_length, hidden))

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "head_size": self.head_size,
                "dropout": self.dropout, "initializer_range": self.initializer_range}
