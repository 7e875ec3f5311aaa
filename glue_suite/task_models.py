"""Task models: the encoder + one head per task kind, and BERT's fine-tuning losses.

Every task model is a functional `keras.Model` over the int32 inputs `input_ids`,
`input_mask`, `segment_ids` ([B, T]; SWAG [B, 4, T]):

    classification   pooled [CLS] -> dropout -> Dense(labels)       logits [B, L]
    regression       pooled [CLS] -> dropout -> Dense(1)            score  [B]
    multiple_choice  pooled [CLS] of each of the 4 sequences -> 1   logits [B, 4]
    span             every token -> Dense(2)                        start, end logits [B, T]
    token            every token -> dropout -> Dense(tags)          logits [B, T, L]

head="bilstm" (Table 5's "+ BiLSTM"): a randomly initialised 2-layer BiLSTM reads the
fine-tuned encoder's sequence_output instead; sentence-level kinds take its [CLS] state,
span and token kinds every position.

Feature-based runs (Table 7's NER; token tasks only) train `build_tagger`'s tagger:
`FeatureCombiner(feature_mode)` picks or mixes the frozen encoder's layers at the
sentence's pieces (glue_suite.frozen_features caches them) and a 2-layer BiLSTM trained
from scratch tags them. `build_feature_model` is the same computation as one model.
"""

from typing import Callable, NamedTuple, Optional

import keras
from keras import ops

from bert_tf import heads
from bert_tf.checkpoints import Checkpoint, assign_weights
from bert_tf.encoder import BertEncoder
from bert_tf.initializers import skipped_draws
from glue_suite import frozen_features
from glue_suite.tasks import (CLASSIFICATION, KINDS, MULTIPLE_CHOICE, REGRESSION, SPAN,
                              TOKEN, TaskSpec)

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
NUM_CHOICES = 4
HEADS = ("dense", "bilstm")
BILSTM_LAYERS = 2  # the paper's feature-based NER model (Section 5.3)
# Per-position logits (span, token) at padding positions: no softmax or argmax picks it,
# and it is the same however much padding a batch has (glue_suite.batching trims it).
PADDING_LOGIT = -1e9


def build_encoder(checkpoint: Checkpoint, dropout: float = 0.1,
                  dtype: Optional[str] = None) -> BertEncoder:
    """The checkpoint's encoder with BERT's fine-tuning dropout, in `dtype` (a Keras
    dtype policy name; None = the global policy)."""
    config = checkpoint.config.replace(hidden_dropout_prob=dropout,
                                       attention_probs_dropout_prob=dropout)
    encoder = BertEncoder(config, dtype=dtype, name="encoder")
    with skipped_draws():  # the checkpoint overwrites every weight
        encoder.build()
    assign_weights({"encoder": encoder}, checkpoint.weights)
    return encoder


def _inputs(shape) -> dict:
    return {name: keras.Input(shape, dtype="int32", name=name) for name in INPUT_NAMES}


class _InferenceMode(keras.layers.Layer):
    """Calls a layer with training=False whatever the model's mode: a functional model
    passes its own `training` to every layer it calls, overriding one given at build time."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer

    def call(self, inputs):
        return self.layer(inputs, training=False)


class _PickLayers(keras.layers.Layer):
    """encoder_outputs (L + 1 tensors [B, T, H]) -> the K at `indices`, stacked [B, T, K, H]:
    what glue_suite.frozen_features caches for a feature mode."""

    def __init__(self, indices, **kwargs):
        super().__init__(**kwargs)
        self.indices = tuple(indices)

    def call(self, encoder_outputs):
        return ops.stack([encoder_outputs[i] for i in self.indices], axis=2)


def build_tagger(spec: TaskSpec, num_layers: int, hidden_size: int, feature_mode: str,
                 bilstm_units: int = 768, dropout: float = 0.1,
                 dtype: Optional[str] = None) -> keras.Model:
    """What a feature-based run (Table 7) trains: the K encoder layers its mode reads at a
    sentence's pieces -> `FeatureCombiner` -> a 2-layer BiLSTM over the sentence -> tags.

    Inputs {"layers" [B, S, K, H] float32, "sentence_mask" int32 [B, S]}; outputs logits
    [B, S, L], PADDING_LOGIT where sentence_mask is 0.
    """
    if spec.kind != TOKEN:
        raise ValueError(f"task {spec.name}: feature_mode needs a token task (conll2003), "
                         f"not a {spec.kind} task; the paper's feature-based runs are NER only")
    layers = keras.Input((None, num_layers, hidden_size), name="layers")
    mask = keras.Input((None,), dtype="int32", name="sentence_mask")
    features = heads.FeatureCombiner(feature_mode, dtype=dtype, name="features")(layers)
    head = heads.BiLSTMHead(spec.num_labels, bilstm_units, BILSTM_LAYERS, dropout,
                            dtype=dtype, name="head")
    logits = head(features, mask)                                         # [B, S, L]
    real = ops.expand_dims(ops.cast(mask, "bool"), -1)
    return keras.Model({"layers": layers, "sentence_mask": mask},
                       ops.where(real, logits, PADDING_LOGIT), name="tagger")


def build_feature_model(spec: TaskSpec, encoder: BertEncoder, max_seq_length: Optional[int],
                        feature_mode: str, bilstm_units: int = 768, dropout: float = 0.1,
                        dtype: Optional[str] = None) -> keras.Model:
    """The feature-based tagger of Table 7 as one model: frozen encoder -> the layers the
    mode reads -> `build_tagger`'s tagger (the model's "tagger" layer), over the encoder
    inputs and "sentence_mask" [B, T]; logits [B, T, L]. Runs do not train this model:
    they run the encoder once per split and train the tagger on cached layers
    (glue_suite.frozen_features), which gives the same logits (its tests)."""
    num_layers = encoder.config.num_hidden_layers
    read = frozen_features.read_layers(feature_mode, num_layers)
    tagger = build_tagger(spec, len(read), encoder.config.hidden_size, feature_mode,
                          bilstm_units, dropout, dtype)
    encoder.trainable = False  # only the layer weights (weighted sums) and the BiLSTM learn
    inputs = _inputs((max_seq_length,))
    mask = keras.Input((max_seq_length,), dtype="int32", name="sentence_mask")
    outputs = _InferenceMode(encoder, name="frozen_encoder")(inputs)["encoder_outputs"]
    layers = _PickLayers(read, name="frozen_layers")(outputs)           # [B, T, K, H]
    logits = tagger({"layers": layers, "sentence_mask": mask})          # [B, T, L]
    return keras.Model({**inputs, "sentence_mask": mask}, logits, name=spec.name)


class _Choices(keras.layers.Layer):
    """[B, C, T] -> [B * C, T]: every (context, ending) is its own sequence. A layer, so
    that T is read when called (trimmed batches vary in length)."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))


class _KindHead(NamedTuple):
    """How one task kind reads the encoder and shapes the model's outputs.

    Args:
        per_token: reads sequence_output [B, T, H] (span, token); else pooled [CLS] [B, H].
        dense: BERT's head, (spec, dropout, initializer_range, dtype) -> layer.
        bilstm_outputs: outputs of the BiLSTM head's projection, per token or sequence.
        from_bilstm: the BiLSTM head's outputs -> the dense head's shapes.
        outputs: the head's outputs -> the model's (SQuAD: named start and end logits).
    """
    per_token: bool
    dense: Callable
    bilstm_outputs: Callable[[TaskSpec], int]
    from_bilstm: Callable = lambda x: x
    outputs: Callable = lambda x: x


# One row per task kind (shapes: the module docstring's table). `dense` builds BERT's head
# from (spec, dropout, initializer_range, dtype).
KIND_HEADS = {
    CLASSIFICATION: _KindHead(
        per_token=False, bilstm_outputs=lambda spec: spec.num_labels,
        dense=lambda spec, dropout, init, dtype: heads.ClassificationHead(
            spec.num_labels, dropout, init, dtype=dtype, name="head")),
    REGRESSION: _KindHead(
        per_token=False, bilstm_outputs=lambda spec: 1,
        dense=lambda spec, dropout, init, dtype: heads.RegressionHead(
            dropout, init, dtype=dtype, name="head"),
        from_bilstm=lambda x: x[:, 0]),                          # [B, 1] -> [B]
    MULTIPLE_CHOICE: _KindHead(
        per_token=False, bilstm_outputs=lambda spec: 1,
        dense=lambda spec, dropout, init, dtype: heads.MultipleChoiceHead(
            NUM_CHOICES, dropout, init, dtype=dtype, name="head"),
        from_bilstm=lambda x: ops.reshape(x, (-1, NUM_CHOICES))),  # [B * C, 1] -> [B, C]
    SPAN: _KindHead(
        per_token=True, bilstm_outputs=lambda spec: 2,
        dense=lambda spec, dropout, init, dtype: heads.SpanHead(
            init, dtype=dtype, name="head"),
        from_bilstm=lambda x: (x[..., 0], x[..., 1]),            # [B, T, 2] -> 2 x [B, T]
        outputs=lambda x: {"start_logits": x[0], "end_logits": x[1]}),
    TOKEN: _KindHead(
        per_token=True, bilstm_outputs=lambda spec: spec.num_labels,
        dense=lambda spec, dropout, init, dtype: heads.TokenClassificationHead(
            spec.num_labels, dropout, init, dtype=dtype, name="head")),
}
assert set(KIND_HEADS) == set(KINDS)


def build_model(spec: TaskSpec, encoder: BertEncoder, max_seq_length: Optional[int],
                dropout: float = 0.1, dtype: Optional[str] = None, head: str = "dense",
                bilstm_units: int = 768) -> keras.Model:
    """encoder + the head of `spec.kind` (KIND_HEADS); with head="bilstm" a BiLSTM over
    sequence_output takes the dense head's place. max_seq_length None: inputs of any
    length (trimmed batches, glue_suite.batching)."""
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; expected one of {HEADS}")
    kind = KIND_HEADS[spec.kind]
    if kind.per_token or head == "bilstm":
        encoder.pooler.trainable = False  # unused: these heads read sequence_output
    if spec.kind == MULTIPLE_CHOICE:
        inputs = _inputs((NUM_CHOICES, max_seq_length))
        flat = {k: _Choices(name=f"{k}_choices")(v) for k, v in inputs.items()}
    else:
        inputs = flat = _inputs((max_seq_length,))
    encoded = encoder(flat)
    if head == "bilstm":
        bilstm = heads.BiLSTMHead(kind.bilstm_outputs(spec), bilstm_units, BILSTM_LAYERS,
                                  dropout, per_token=kind.per_token, dtype=dtype, name="head")
        outputs = kind.from_bilstm(bilstm(encoded["sequence_output"], flat["input_mask"]))
    else:
        dense = kind.dense(spec, dropout, encoder.config.initializer_range, dtype)
        outputs = dense(encoded["sequence_output" if kind.per_token else "pooled_output"])
    if spec.kind == SPAN:
        # Padding is never an answer. Out of the softmax, it also leaves the loss the same
        # for a batch padded to T and a trimmed one.
        real = ops.cast(flat["input_mask"], "bool")
        outputs = tuple(ops.where(real, logits, PADDING_LOGIT) for logits in outputs)
    return keras.Model(inputs, kind.outputs(outputs), name=spec.name)


def compile_model(model: keras.Model, kind: str, optimizer, run_eagerly: bool = False,
                  jit_compile: bool = False) -> None:
    """BERT's losses: softmax cross-entropy (SQuAD: mean of the start and end losses;
    NER: the mean over first word pieces, via label weights), squared error for STS-B."""
    xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # NER divides by the scored pieces, not by every position [B, T] (Keras's default),
    # so that a batch's loss does not depend on its padding (trimmed batches).
    token_xent = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")
    if kind == SPAN:
        model.compile(optimizer, loss={"start_logits": xent, "end_logits": xent},
                      loss_weights={"start_logits": 0.5, "end_logits": 0.5},
                      run_eagerly=run_eagerly, jit_compile=jit_compile)
    elif kind == REGRESSION:
        model.compile(optimizer, loss=keras.losses.MeanSquaredError(), run_eagerly=run_eagerly,
                      jit_compile=jit_compile)
    elif kind == TOKEN:
        model.compile(optimizer, loss=token_xent, run_eagerly=run_eagerly,
                      jit_compile=jit_compile)
    else:
        model.compile(optimizer, loss=xent, run_eagerly=run_eagerly, jit_compile=jit_compile)


def model_inputs(features: dict) -> dict:
    return {name: features[name] for name in INPUT_NAMES}
