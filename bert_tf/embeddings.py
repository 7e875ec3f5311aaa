"""BERT input embeddings: token + segment + learned position, then LayerNorm and dropout."""

import keras
from keras import ops

from bert_tf.dropout import Dropout
from bert_tf.initializers import TruncatedNormal
from bert_tf.layer_norm import LayerNorm


class BertEmbeddings(keras.layers.Layer):
    """Sums token, segment and learned absolute position embeddings.

    Args:
        vocab_size: number of WordPiece ids.
        hidden_size: embedding width H.
        max_position_embeddings: number of learned positions; longer inputs are an error.
        type_vocab_size: number of segment ids.
        dropout: dropout rate applied after the LayerNorm.
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        init = TruncatedNormal(stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="token_embedding")
        self.segment_embedding = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="segment_embedding")
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm")
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.segment_embedding.build(input_shape)
        self.position_embedding = self.add_weight(
            shape=(self.max_position_embeddings, self.hidden_size), name="position_embedding",
            initializer=TruncatedNormal(stddev=self.initializer_range))
        self.layer_norm.build((*input_shape, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"sequence length {seq_length} exceeds max_position_embeddings="
                f"{self.max_position_embeddings}; truncate inputs to at most that many tokens")
        positions = ops.cast(self.position_embedding[: ops.shape(input_ids)[1]], self.compute_dtype)
        x = self.token_embedding(input_ids) + self.segment_embedding(segment_ids)
        x = x + positions[None]  # [B, T, H]
        return self.dropout_layer(self.layer_norm(x), training=training)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_size": self.type_vocab_size, "dropout": self.dropout,
                "layer_norm_eps": self.layer_norm_eps,
                "initializer_range": self.initializer_range}
