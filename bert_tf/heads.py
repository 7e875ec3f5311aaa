"""Task heads on top of `BertEncoder` outputs. Each is one small Keras layer.

Pretraining: MaskedLMHead (decoder tied to the token embeddings), NextSentenceHead.
Fine-tuning: ClassificationHead / RegressionHead (pooled [CLS]), SpanHead (SQuAD),
MultipleChoiceHead (SWAG), TokenClassificationHead (NER), BiLSTMHead (the "+ BiLSTM"
ablation and the feature-based NER of Table 7), and FeatureCombiner, which picks or
mixes the encoder layers a feature mode reads (`feature_layers`) for the feature-based
experiments.
"""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.dropout import Dropout
from bert_tf.initializers import TruncatedNormal
from bert_tf.layer_norm import LayerNorm
from bert_tf.transformer_block import activation


def _init(initializer_range):
    return TruncatedNormal(stddev=initializer_range)


class MaskedLMHead(keras.layers.Layer):
    """Dense -> GELU -> LayerNorm, then logits against the (tied) token embeddings + bias.

    Only the masked positions are gathered first, so the [V]-wide matmul costs
    max_predictions_per_seq rows per example instead of T (and only the weighted ones
    with `BertPretrainer.loss_sums(..., only_weighted=True)`, as the trainer runs it
    wherever shapes may change).

    Args:
        vocab_size: V.
        hidden_size: H.
        hidden_act: activation of the transform ("gelu" = exact erf GELU).
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, vocab_size, hidden_size, hidden_act="gelu", layer_norm_eps=1e-12,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.transform = keras.layers.Dense(hidden_size, activation=activation(hidden_act),
                                            kernel_initializer=_init(initializer_range),
                                            dtype=self.dtype_policy, name="transform")
        self.layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=self.dtype_policy,
                                    name="layer_norm")

    def build(self, input_shape):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_positions, embedding_matrix, labels=None):
        """[B, T, H], int [B, P], [V, H] -> logits [B, P, V] (float32); with `labels`
        (int [B, P]) -> (logits, the labels' logits [B, P] float32)."""
        gathered = self.gather(sequence_output, masked_positions)  # [B, P, H]
        batch, predictions = ops.shape(gathered)[0], ops.shape(gathered)[1]
        rows = ops.reshape(gathered, (-1, self.hidden_size))  # [N, H], N = B * P
        if labels is None:
            logits = self.predict_rows(rows, embedding_matrix)
            return ops.reshape(logits, (batch, predictions, self.vocab_size))
        logits, label_logits = self.predict_rows(rows, embedding_matrix,
                                                 ops.reshape(labels, (-1,)))
        return (ops.reshape(logits, (batch, predictions, self.vocab_size)),
                ops.reshape(label_logits, (batch, predictions)))

    @staticmethod
    def gather(sequence_output, masked_positions):
        """[B, T, H], int [B, P] -> the hidden states at the positions [B, P, H]."""
        return ops.take_along_axis(
            sequence_output, ops.cast(masked_positions, "int32")[..., None], axis=1)

    def predict_rows(self, rows, embedding_matrix, labels=None):
        """Gathered hidden states [N, H], [V, H] -> logits [N, V] (float32); with `labels`
        (int [N]) -> (logits, the labels' logits [N] float32).

        The labels' logits are the logits' values at the labels, computed on their own
        from the labels' embedding rows: a loss written with them (log-sum-exp of the
        logits minus the label's logit, `pretraining_model.cross_entropy_and_prediction`)
        sends the one-hot part of its gradient through [N, H] rows instead of one more
        pass over the [N, V] logits.
        """
        rows = self.layer_norm(self.transform(rows))
        table = ops.cast(embedding_matrix, rows.dtype)
        # One 2-D matmul against the [V, H] table as stored (transpose_b): its gradient
        # is then a [V, H] matmul too, where a transposed operand cost an extra [H, V]
        # transpose of the gradient every step. BiasAdd's gradient is a fused reduction.
        logits = tf.matmul(rows, table, transpose_b=True)  # [N, V]
        bias = ops.cast(self.output_bias, "float32")
        logits = tf.nn.bias_add(ops.cast(logits, "float32"), bias)
        if labels is None:
            return logits
        labels = ops.cast(labels, "int32")
        # The matmul's products in float32 (a product of two bfloat16 values is exact in
        # float32), summed in float32.
        label_logits = ops.sum(ops.cast(rows, "float32")
                               * ops.cast(ops.take(table, labels, axis=0), "float32"),
                               axis=-1) + ops.take(bias, labels)
        return logits, label_logits

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "hidden_act": self.hidden_act,
                "layer_norm_eps": self.layer_norm_eps,
                "initializer_range": self.initializer_range}


class _DenseHead(keras.layers.Layer):
    """Dropout -> Dense(num_outputs); float32 logits even under mixed precision."""

    def __init__(self, num_outputs, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(num_outputs, kernel_initializer=_init(initializer_range),
                                        dtype=self.dtype_policy, name="dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, x, training=None):
        return ops.cast(self.dense(self.dropout_layer(x, training=training)), "float32")

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "dropout": self.dropout, "initializer_range": self.initializer_range}


class NextSentenceHead(_DenseHead):
    """pooled_output [B, H] -> 2 logits: 0 = B follows A, 1 = B is random (as in the original)."""

    def __init__(self, initializer_range=0.02, **kwargs):
        kwargs.pop("num_outputs", None)
        kwargs.pop("dropout", None)
        super().__init__(2, 0.0, initializer_range, **kwargs)


class ClassificationHead(_DenseHead):
    """pooled_output [B, H] -> [B, num_outputs] logits (GLUE classification)."""


class RegressionHead(_DenseHead):
    """pooled_output [B, H] -> [B] score (STS-B)."""

    def __init__(self, dropout=0.1, initializer_range=0.02, **kwargs):
        kwargs.pop("num_outputs", None)
        super().__init__(1, dropout, initializer_range, **kwargs)

    def call(self, x, training=None):
        return super().call(x, training=training)[:, 0]


class TokenClassificationHead(_DenseHead):
    """sequence_output [B, T, H] -> [B, T, num_outputs] logits (NER)."""


class SpanHead(_DenseHead):
    """sequence_output [B, T, H] -> (start_logits [B, T], end_logits [B, T]) (SQuAD).

    As in the original, no dropout before the span projection.
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        kwargs.pop("num_outputs", None)
        kwargs.pop("dropout", None)
        super().__init__(2, 0.0, initializer_range, **kwargs)

    def call(self, x, training=None):
        logits = super().call(x, training=training)
        return logits[..., 0], logits[..., 1]


class MultipleChoiceHead(_DenseHead):
    """pooled_output of every (context, ending) pair [B * C, H] -> [B, C] choice logits (SWAG).

    One score per [CLS]; the softmax over the C choices lives in the loss.
    """

    def __init__(self, num_choices, dropout=0.1, initializer_range=0.02, **kwargs):
        kwargs.pop("num_outputs", None)
        super().__init__(1, dropout, initializer_range, **kwargs)
        self.num_choices = num_choices

    def call(self, x, training=None):
        return ops.reshape(super().call(x, training=training), (-1, self.num_choices))

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}


class BiLSTMHead(keras.layers.Layer):
    """A randomly initialised stack of bidirectional LSTMs, then a dense projection.

    Used over frozen features for the feature-based NER (paper Table 7: two 768-unit layers)
    and over the LTR model for the "+ BiLSTM" ablation (Table 5).

    Args:
        num_outputs: output size per token (or per sequence with per_token=False).
        units: LSTM units per direction.
        num_layers: number of BiLSTM layers.
        dropout: dropout on the BiLSTM outputs.
        per_token: True -> [B, T, num_outputs]; False -> the [CLS] position's state,
            [B, num_outputs], for sentence-level tasks.
    """

    def __init__(self, num_outputs, units=768, num_layers=2, dropout=0.1, per_token=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.units = units
        self.num_layers = num_layers
        self.dropout = dropout
        self.per_token = per_token
        self.lstms = [keras.layers.Bidirectional(
            keras.layers.LSTM(units, return_sequences=True, dtype=self.dtype_policy),
            dtype=self.dtype_policy, name=f"bilstm_{i}") for i in range(num_layers)]
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(num_outputs, dtype=self.dtype_policy, name="dense")

    def build(self, input_shape):
        shape = tuple(input_shape)
        for lstm in self.lstms:
            lstm.build(shape)
            shape = (*shape[:-1], 2 * self.units)
        self.dense.build(shape)
        self.built = True

    def call(self, features, input_mask, training=None):
        x = features  # [B, T, F]
        mask = ops.cast(input_mask, "bool")
        for lstm in self.lstms:
            x = self.dropout_layer(lstm(x, mask=mask, training=training), training=training)
        if not self.per_token:
            x = x[:, 0]
        return ops.cast(self.dense(x), "float32")

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs, "units": self.units,
                "num_layers": self.num_layers, "dropout": self.dropout,
                "per_token": self.per_token}


FEATURE_MODES = ("embeddings", "second_to_last", "last", "weighted_sum_last_four",
                 "concat_last_four", "weighted_sum_all")


def feature_layers(mode: str, num_outputs: int) -> tuple:
    """The encoder_outputs a feature mode reads, as indices into the num_outputs = L + 1
    outputs (0: the embeddings, then every block). A model with fewer than four blocks
    gives the "last four" modes all the outputs it has."""
    if mode not in FEATURE_MODES:
        raise ValueError(f"unknown feature mode {mode!r}; expected one of {FEATURE_MODES}")
    last = num_outputs - 1
    return {"embeddings": (0,), "second_to_last": (last - 1,), "last": (last,),
            "weighted_sum_all": tuple(range(num_outputs))}.get(
                mode, tuple(range(max(0, num_outputs - 4), num_outputs)))


class FeatureCombiner(keras.layers.Layer):
    """The K layers a feature mode reads (`feature_layers`), stacked [B, T, K, H] -> token
    features [B, T, H] (paper Table 7): the one layer, the K layers concatenated ([B, T,
    K * H], concat_last_four) or their weighted sum.

    Weighted sums use learned softmax-normalised scalar weights (ELMo-style), the only
    trainable part of this layer.

    Args:
        mode: one of FEATURE_MODES.
    """

    def __init__(self, mode, **kwargs):
        super().__init__(**kwargs)
        if mode not in FEATURE_MODES:
            raise ValueError(f"unknown feature mode {mode!r}; expected one of {FEATURE_MODES}")
        self.mode = mode

    def build(self, input_shape):
        if self.mode.startswith("weighted_sum"):
            self.layer_weights = self.add_weight(shape=(input_shape[-2],), initializer="zeros",
                                                 name="layer_weights")
        self.built = True

    def call(self, layers):
        if self.mode == "concat_last_four":  # layer after layer within each token
            shape = ops.shape(layers)
            return ops.reshape(layers, (shape[0], shape[1], layers.shape[-2] * layers.shape[-1]))
        if self.mode.startswith("weighted_sum"):
            weights = ops.cast(ops.softmax(self.layer_weights), layers.dtype)
            return ops.einsum("btkh,k->bth", layers, weights)
        return layers[:, :, 0]

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}
