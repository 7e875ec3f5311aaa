"""The BERT encoder: embeddings -> L transformer blocks -> tanh pooler on [CLS] (a
left-to-right encoder: on its last real token)."""

import keras
from keras import ops

from bert_tf.attention import attention_mask
from bert_tf.config import BertConfig
from bert_tf.embeddings import BertEmbeddings
from bert_tf.initializers import TruncatedNormal
from bert_tf.transformer_block import TransformerBlock


class Pooler(keras.layers.Layer):
    """tanh(Dense(h)) at the sentence's summary position: the sentence vector used by
    NSP and classification heads.

    The summary position is [CLS] (position 0). A left-to-right encoder (`causal`, the
    paper's "LTR & No NSP") reads its last real token instead: under a left-only mask
    [CLS] attends to itself alone, so its vector is the same for every input and a
    classifier on it cannot beat the majority class, while the last token is the one
    position that sees the whole input (as OpenAI GPT classifies from its last token).

    Args:
        hidden_size: width H.
        initializer_range: stddev of the truncated-normal initializer.
        causal: pool the last position where `input_mask` is 1, not position 0.
    """

    def __init__(self, hidden_size, initializer_range=0.02, causal=False, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.causal = causal
        self.dense = keras.layers.Dense(
            hidden_size, activation="tanh", dtype=self.dtype_policy, name="dense",
            kernel_initializer=TruncatedNormal(stddev=initializer_range))

    def build(self, input_shape):
        self.dense.build((input_shape[0], input_shape[-1]))
        self.built = True

    def call(self, sequence_output, input_mask=None):
        if not self.causal:
            return self.dense(sequence_output[:, 0])  # [B, H]
        last = ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1  # [B]; real tokens lead
        at_last = ops.one_hot(last, ops.shape(sequence_output)[1], dtype=sequence_output.dtype)
        return self.dense(ops.einsum("bt,bth->bh", at_last, sequence_output))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range, "causal": self.causal}


class BertEncoder(keras.Model):
    """BERT backbone: int32 {"input_ids", "input_mask", "segment_ids"} [B, T] ->
    {"sequence_output" [B, T, H], "pooled_output" [B, H],
     "encoder_outputs": L + 1 tensors [B, T, H] (embeddings, then every block)}.

    All L + 1 outputs are returned because the feature-based experiments (paper Table 7)
    read hidden layers other than the last.

    Args:
        config: a `BertConfig`.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings(
            config.vocab_size, config.hidden_size, config.max_position_embeddings,
            config.type_vocab_size, config.hidden_dropout_prob, config.layer_norm_eps,
            config.initializer_range, dtype=policy, name="embeddings")
        self.blocks = [
            TransformerBlock(config.hidden_size, config.num_attention_heads,
                             config.intermediate_size, config.hidden_act,
                             config.hidden_dropout_prob, config.attention_probs_dropout_prob,
                             config.layer_norm_eps, config.initializer_range,
                             dtype=policy, name=f"layer_{i}")
            for i in range(config.num_hidden_layers)]
        self.pooler = Pooler(config.hidden_size, config.initializer_range, config.causal,
                             dtype=policy, name="pooler")

    def build(self, input_shape=None):
        shape = (None, None)
        self.embeddings.build(shape)
        for block in self.blocks:
            block.build((*shape, self.config.hidden_size))
        self.pooler.build((*shape, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        mask = attention_mask(inputs["input_mask"], causal=self.config.causal)  # [B, T, T]
        x = self.embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        encoder_outputs = [x]
        for block in self.blocks:
            x = block(x, mask, training=training)
            encoder_outputs.append(x)
        return {"sequence_output": x, "pooled_output": self.pooler(x, inputs["input_mask"]),
                "encoder_outputs": encoder_outputs}

    @property
    def token_embedding_matrix(self):
        """[V, H] table that the masked-LM decoder shares (weight tying)."""
        return self.embeddings.token_embedding.embeddings

    def dummy_inputs(self, batch_size=1, seq_length=8):
        ids = ops.zeros((batch_size, seq_length), "int32")
        return {"input_ids": ids, "input_mask": ops.ones_like(ids), "segment_ids": ids}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)
