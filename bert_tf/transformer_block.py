"""One post-LayerNorm transformer block, as in the original BERT."""

import math

import keras
from keras import ops

from bert_tf.attention import SelfAttention, as_rows
from bert_tf.dropout import Dropout
from bert_tf.initializers import TruncatedNormal
from bert_tf.layer_norm import LayerNorm


@ops.custom_gradient
def gelu(x):
    """BERT's GELU, x * Phi(x), exact: 0.5 * x * (1 + erf(x / sqrt(2))), as written in the
    original and in Hugging Face. Keras's gelu(approximate=False) is the same function
    through erfc, which costs more on CPU: forward + backward of a [8192, 512] tensor
    took 1.25x as long in float32 and 2.1x in bfloat16.

    Its gradient is written out, Phi(x) + x * phi(x) with phi the normal density, reusing
    the forward's Phi(x). Differentiating the formula op by op made more passes over the
    [B, T, I] activations; the BERT-Base train step runs 1.01x as fast with this one, in
    float32 and in bfloat16 (results/benchmark/gelu_grad_ab_*.txt).
    """
    cdf = 0.5 * (1.0 + ops.erf(x * ops.cast(1 / math.sqrt(2), x.dtype)))

    def grad(*args, upstream=None):
        if upstream is None:  # the TensorFlow backend passes it positionally
            (upstream,) = args
        pdf = ops.exp(ops.square(x) * ops.cast(-0.5, x.dtype)) * ops.cast(
            1 / math.sqrt(2 * math.pi), x.dtype)
        return upstream * (cdf + x * pdf)

    return x * cdf, grad


def activation(name):
    """The feed-forward activation: BERT's GELU is the exact erf form, not the tanh one."""
    return {"gelu": gelu,
            "gelu_new": lambda x: keras.activations.gelu(x, approximate=True),
            "relu": keras.activations.relu}[name]


class TransformerBlock(keras.layers.Layer):
    """x -> LN(x + Attention(x)) -> LN(h + FFN(h)), FFN = Dense(I) -> GELU -> Dense(H).

    Args:
        hidden_size: width H.
        num_heads: attention heads A.
        intermediate_size: feed-forward inner width I (4H in the paper).
        hidden_act: "gelu" (exact), "gelu_new" (tanh approximation) or "relu".
        dropout: dropout on each residual branch.
        attention_dropout: dropout on the attention probabilities.
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu", dropout=0.1,
                 attention_dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        init = TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = SelfAttention(num_heads, hidden_size // num_heads, attention_dropout,
                                       initializer_range, dtype=policy, name="attention")
        self.attention_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(intermediate_size, activation=activation(hidden_act),
                                               kernel_initializer=init, dtype=policy,
                                               name="intermediate")
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init, dtype=policy,
                                               name="output")
        self.output_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm")
        self.dropout_layer = Dropout(dropout, dtype=policy)

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_size))
        self.output_layer_norm.build(input_shape)
        self.built = True

    def call(self, x, mask, training=None):
        attended = self.dropout_layer(self.attention(x, mask, training=training), training=training)
        h = as_rows(self.attention_layer_norm(x + attended))  # [B * T, H]
        ffn = self.output_dense(self.intermediate(h))  # [B * T, I] -> [B * T, H]
        out = self.output_layer_norm(h + self.dropout_layer(ffn, training=training))
        return ops.reshape(out, ops.shape(x))  # [B, T, H]

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_eps": self.layer_norm_eps,
                "initializer_range": self.initializer_range}
