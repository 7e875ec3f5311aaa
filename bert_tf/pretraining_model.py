"""BertPretrainer: the encoder with the pretraining heads, and the paper's objectives.

Objectives (paper Section 3.1 and the Table 5 ablations):
  "nsp"     masked LM + next sentence prediction (BERT as published):
            loss = mean MLM loss over the masked positions + mean NSP loss
  "no_nsp"  masked LM only ("No NSP")
  "ltr"     left-to-right LM with no NSP ("LTR & No NSP"): causal attention, and the
            prediction at position t is scored against input_ids[t + 1], over every
            position whose next token is real (not padding), or over P of them drawn
            anew each time a sequence is read (`sample_next_token_positions`, for
            budgets where the head's cost over every position is too high). The
            decoder is the same tied MaskedLMHead. The exported config keeps
            causal=True, so the model stays left-only when fine-tuned.
The masking-rate ablations (Table 8) change only the data (`--mask_rates`).

Losses come out as sums over the batch (`loss_sums`), not means: the trainer divides
them by the *global* number of predictions, so a batch split over replicas or gradient
accumulation steps gives the same gradient as the whole batch on one device.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.heads import MaskedLMHead, NextSentenceHead
from bert_tf.pretraining_instances import OBJECTIVES

# What `loss_sums` returns; every value is a float32 scalar summed over the batch.
# mlm_hidden_*: the same over the LM targets the input does not show (`hidden_targets`).
SUM_KEYS = ("mlm_loss", "mlm_correct", "mlm_count", "mlm_hidden_loss", "mlm_hidden_correct",
            "mlm_hidden_count", "nsp_loss", "nsp_correct", "nsp_count")


def prediction_targets(features: dict, objective: str):
    """Where the LM head predicts and what: (positions [B, P], labels [B, P], weights [B, P]).

    Masked LM: the records' masked_lm_positions / _ids / _weights (P = max_predictions).
    LTR: every position t < T - 1 predicts input_ids[t + 1]; weight 1 where that token
    is real (P = T - 1). With next_token_positions / _weights in the features
    (`sample_next_token_positions`), only those positions.
    """
    if objective == "ltr" and "next_token_positions" in features:
        positions = features["next_token_positions"]  # [B, P], each < T - 1
        labels = ops.take_along_axis(features["input_ids"], positions + 1, axis=1)
        return positions, labels, ops.cast(features["next_token_weights"], "float32")
    if objective == "ltr":
        input_ids = features["input_ids"]  # [B, T]
        batch, seq_length = ops.shape(input_ids)[0], ops.shape(input_ids)[1]
        positions = ops.broadcast_to(ops.arange(seq_length - 1)[None], (batch, seq_length - 1))
        weights = ops.cast(features["input_mask"][:, 1:], "float32")
        return positions, input_ids[:, 1:], weights
    return (features["masked_lm_positions"], features["masked_lm_ids"],
            ops.cast(features["masked_lm_weights"], "float32"))


def hidden_targets(features: dict, positions, labels, weights, objective: str):
    """The weights [B, P] of the LM targets that the input does not show.

    80/10/10 masking leaves 10% of the targets unchanged in the input. Copying them is
    learnt first, and is worth ~9 points of MLM accuracy and a loss below the unigram
    entropy with no use of the context: BERT-Tiny at step 4,500 of the cpu recipe
    predicted 91% of the unchanged targets and 6.1% of the [MASK]ed ones, the unigram
    rate (15.5% by step 15,000). The metrics over the hidden targets are what the
    context buys. LTR never shows its target (the next token).
    """
    if objective == "ltr":
        return weights
    shown = ops.take_along_axis(features["input_ids"], positions, axis=1)  # [B, P]
    return weights * ops.cast(ops.not_equal(ops.cast(shown, "int32"),
                                            ops.cast(labels, "int32")), "float32")


def sample_next_token_positions(count: int):
    """A batch transform for LTR pretraining on `count` next-token predictions per
    sequence: `transform(features, seed)` adds next_token_positions [B, count] (int32),
    drawn uniformly without replacement from the positions t whose next token t + 1 is
    real, and next_token_weights [B, count] (1.0; 0.0 where a sequence has fewer than
    `count` such positions). Stateless: a function of the batch and the [2] seed, as
    `make_pretraining_dataset` passes one per batch (its `batch_transform` argument).
    """
    def transform(features: dict, seed) -> dict:
        predicts_real = tf.cast(features["input_mask"][:, 1:], tf.bool)  # [B, T - 1]
        keys = tf.random.stateless_uniform(tf.shape(predicts_real), tf.cast(seed, tf.int64))
        keys = tf.where(predicts_real, keys, -1.0)  # real positions first, in random order
        top, positions = tf.math.top_k(keys, k=count)
        return {**features, "next_token_positions": positions,
                "next_token_weights": tf.cast(top >= 0.0, tf.float32)}
    return transform


class PredictionSlots:
    """Which of the [B, P] prediction slots the masked LM head computes.

    All of them (static shapes: XLA, TPUs), or only those with a weight: the records pad
    to max_predictions_per_seq (the 20th of 20 slots on every full 128-token sequence,
    more on short ones; 10% of the cpu plan's slots), and each padding slot costs a
    [V]-wide row of the step's largest matmuls, softmax and argmax for nothing.
    """

    def __init__(self, weights, only_weighted: bool):
        self.shape = tf.shape(weights, out_type=tf.int64)  # [B, P]
        self.slots = tf.where(weights > 0) if only_weighted else None  # [N, 2] (example, slot)

    def take(self, values):
        """[B, P, ...] -> the computed slots' values [N, ...]."""
        if self.slots is None:
            return ops.reshape(values, (-1, *values.shape[2:]))
        return tf.gather_nd(values, self.slots)

    def per_slot(self, values):
        """[N] -> [B, P], 0 in the slots not computed."""
        if self.slots is None:
            return ops.reshape(values, self.shape)
        return tf.scatter_nd(self.slots, values, self.shape)


def cross_entropy_and_prediction(logits, label_logits):
    """float32 logits [N, V], the labels' logits [N] -> (cross-entropy [N], argmax id [N]
    int32).

    The same values as `tf.nn.sparse_softmax_cross_entropy_with_logits` and `tf.argmax`,
    at less cost over the masked LM's [N, 30522] logits on CPU, where these passes took
    longer than the vocabulary matmul: cross-entropy = log-sum-exp(logits) - the label's
    logit; the softmax is one oneDNN kernel and its gradient is softmax - one_hot, whose
    softmax part is one multiply and whose one-hot part reaches the label's logit, which
    `MaskedLMHead` computes from [N, H] rows (a scatter into the [N, V] gradient cost a
    copy of it). (`keras.ops.argmax` adds four more passes to handle -0.0; plain argmax
    suffices.)
    """
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return _log_sum_exp(logits, predicted) - label_logits, predicted


@tf.custom_gradient
def _log_sum_exp(logits, predicted):
    probs = tf.nn.softmax(logits)  # [N, V]
    at_max = tf.stack([tf.range(tf.shape(predicted)[0]), predicted], axis=1)  # [N, 2]
    # log(sum(exp(logits))) = max logit - log(max prob), as the max prob is exp(0) / sum.
    # Unlike the label's prob, the max prob (>= 1/V) cannot underflow to 0.
    log_sum_exp = tf.gather_nd(logits, at_max) - tf.math.log(tf.gather_nd(probs, at_max))

    def gradient(upstream):  # [N] -> d/d logits = upstream * softmax
        return probs * upstream[:, None], None

    return log_sum_exp, gradient


class BertPretrainer(keras.Model):
    """BertEncoder + MaskedLMHead (tied to the token embeddings) + NextSentenceHead.

    Inputs are the pretraining records' features (int32): input_ids, input_mask,
    segment_ids [B, T]; masked_lm_positions / masked_lm_ids [B, P], masked_lm_weights
    (float) [B, P]; next_sentence_labels [B, 1]. "ltr" needs only the first three.

    Without NSP the pooler and the NSP head get no gradient; they are frozen
    (trainable=False) so that weight decay does not shrink them, and are exported at
    their initial values so the checkpoint keeps the standard layout.

    Args:
        config: the encoder's BertConfig; "ltr" requires (and `for_objective` sets)
            causal=True, the other objectives causal=False.
        objective: one of OBJECTIVES.
    """

    def __init__(self, config: BertConfig, objective: str = "nsp", **kwargs):
        super().__init__(**kwargs)
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
        if config.causal != (objective == "ltr"):
            raise ValueError(f"objective {objective!r} needs config.causal="
                             f"{objective == 'ltr'}, got causal={config.causal}; build the "
                             f"config with BertPretrainer.config_for(config, objective)")
        self.config = config
        self.objective = objective
        policy = self.dtype_policy
        self.encoder = BertEncoder(config, dtype=policy, name="encoder")
        self.mlm = MaskedLMHead(config.vocab_size, config.hidden_size, config.hidden_act,
                                config.layer_norm_eps, config.initializer_range, dtype=policy,
                                name="mlm")
        self.nsp = NextSentenceHead(config.initializer_range, dtype=policy, name="nsp")
        if not self.uses_nsp:
            self.encoder.pooler.trainable = False
            self.nsp.trainable = False

    @staticmethod
    def config_for(config: BertConfig, objective: str) -> BertConfig:
        """`config` with the attention direction the objective needs."""
        return config.replace(causal=objective == "ltr")

    @property
    def uses_nsp(self) -> bool:
        return self.objective == "nsp"

    def build(self, input_shape=None):
        self.encoder.build()
        self.mlm.build((None, None, self.config.hidden_size))
        self.nsp.build((None, self.config.hidden_size))
        self.built = True

    def call(self, features, training=None):
        """-> {"mlm_logits" [B, P, V], "mlm_label_logits" [B, P] (the labels' logits),
        "nsp_logits" [B, 2]}, float32."""
        outputs = self._encode(features, training)
        positions, labels, _ = prediction_targets(features, self.objective)
        logits, label_logits = self.mlm(outputs["sequence_output"], positions,
                                        self.encoder.token_embedding_matrix, labels)
        return {"mlm_logits": logits, "mlm_label_logits": label_logits,
                "nsp_logits": self.nsp(outputs["pooled_output"], training=training)}

    def _encode(self, features, training):
        return self.encoder({name: features[name] for name in
                             ("input_ids", "input_mask", "segment_ids")}, training=training)

    def loss_sums(self, features, training=None, only_weighted=False) -> dict:
        """Forward pass -> {SUM_KEYS: float32 scalar sums over the batch}.

        mlm_loss: sum of weight * cross-entropy over the LM predictions; mlm_count: sum
        of their weights. nsp_*: over the examples (all 0 without NSP). only_weighted:
        the LM head computes only the predictions with a weight (`PredictionSlots`;
        dynamic shapes, so not under XLA or on TPUs); the sums are the same.
        """
        return {key: ops.sum(value) for key, value in self.example_sums(
            features, training=training, only_weighted=only_weighted).items()}

    def example_sums(self, features, training=None, only_weighted=False) -> dict:
        """Forward pass -> {SUM_KEYS: float32 [B]}: `loss_sums` of each example (the
        held-out losses per sequence, for confidence intervals over sequences)."""
        outputs = self._encode(features, training)
        positions, labels, weights = prediction_targets(features, self.objective)  # [B, P]
        hidden = hidden_targets(features, positions, labels, weights, self.objective)
        slots = PredictionSlots(weights, only_weighted)
        slot_labels = ops.cast(slots.take(labels), "int32")  # [N]
        logits, label_logits = self.mlm.predict_rows(
            slots.take(self.mlm.gather(outputs["sequence_output"], positions)),
            self.encoder.token_embedding_matrix, slot_labels)
        cross_entropy, predicted = cross_entropy_and_prediction(logits, label_logits)
        cross_entropy = slots.per_slot(cross_entropy)  # [B, P]
        correct = slots.per_slot(ops.cast(ops.equal(predicted, slot_labels), "float32"))
        sums = {"mlm_loss": ops.sum(cross_entropy * weights, axis=1),
                "mlm_correct": ops.sum(correct * weights, axis=1),
                "mlm_count": ops.sum(weights, axis=1),
                "mlm_hidden_loss": ops.sum(cross_entropy * hidden, axis=1),
                "mlm_hidden_correct": ops.sum(correct * hidden, axis=1),
                "mlm_hidden_count": ops.sum(hidden, axis=1)}
        batch = ops.shape(weights)[0]
        zeros = ops.zeros((batch,), "float32")
        if not self.uses_nsp:
            return {**sums, "nsp_loss": zeros, "nsp_correct": zeros, "nsp_count": zeros}
        nsp_labels = ops.cast(ops.reshape(features["next_sentence_labels"], (-1,)), "int32")
        nsp_logits = self.nsp(outputs["pooled_output"], training=training)  # [B, 2]
        nsp_cross_entropy = keras.losses.sparse_categorical_crossentropy(
            nsp_labels, nsp_logits, from_logits=True)  # [B]
        nsp_correct = ops.equal(ops.cast(ops.argmax(nsp_logits, -1), "int32"), nsp_labels)
        return {**sums, "nsp_loss": nsp_cross_entropy,
                "nsp_correct": ops.cast(nsp_correct, "float32"), "nsp_count": zeros + 1.0}

    def heads(self) -> dict:
        """The {"encoder", "mlm", "nsp"} dict that `checkpoints.save_checkpoint` writes."""
        return {"encoder": self.encoder, "mlm": self.mlm, "nsp": self.nsp}

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "objective": self.objective}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)


def pretraining_loss(sums: dict, mlm_count, nsp_count):
    """The objective from `loss_sums`: MLM sum / mlm_count + NSP sum / nsp_count.

    Pass the counts of the whole (global) batch to get the gradient of the global mean
    from any part of it. A part with no predictions contributes 0.
    """
    mlm = sums["mlm_loss"] / ops.maximum(mlm_count, 1.0)
    return mlm + sums["nsp_loss"] / ops.maximum(nsp_count, 1.0)


def mean_metrics(sums: dict) -> dict:
    """Sums (of one batch or of many) -> mean losses and accuracies.

    For the held-out data, `mlm_perplexity` = exp(mean MLM loss), the masked-LM
    perplexity of the paper's Table 6. mlm_hidden_loss / _accuracy: over the targets the
    input hides (`hidden_targets`), what the context buys.
    """
    mlm_count, nsp_count = max(float(sums["mlm_count"]), 1.0), float(sums["nsp_count"])
    metrics = {"mlm_loss": float(sums["mlm_loss"]) / mlm_count,
               "mlm_accuracy": float(sums["mlm_correct"]) / mlm_count}
    metrics["mlm_perplexity"] = math.exp(min(metrics["mlm_loss"], 700.0))
    hidden_count = float(sums["mlm_hidden_count"])
    if hidden_count:
        metrics["mlm_hidden_loss"] = float(sums["mlm_hidden_loss"]) / hidden_count
        metrics["mlm_hidden_accuracy"] = float(sums["mlm_hidden_correct"]) / hidden_count
    if nsp_count:
        metrics["nsp_loss"] = float(sums["nsp_loss"]) / nsp_count
        metrics["nsp_accuracy"] = float(sums["nsp_correct"]) / nsp_count
    metrics["loss"] = metrics["mlm_loss"] + metrics.get("nsp_loss", 0.0)
    return metrics
