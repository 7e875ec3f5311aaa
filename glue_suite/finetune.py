"""Fine-tuning: encoder + one head per task kind, BERT's optimizer, Keras fit and predict,
decoding model outputs into predictions and metrics, and the learning-rate x seed grid.

    features (glue_suite.features) -> tf.data -> keras.Model.fit -> predict -> evaluate

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

feature_mode (Table 7's feature-based NER; token tasks only): the encoder is frozen and
run in inference mode, once per split (glue_suite.frozen_features caches the layers the
mode reads); what trains is the tagger (`build_tagger`): `FeatureCombiner(feature_mode)`
picks or mixes those layers at the sentence's pieces and a 2-layer BiLSTM trained from
scratch tags them. `build_feature_model` is the same computation as one model.
"""

import dataclasses
import logging
import math
import time
from typing import Callable, NamedTuple, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert_tf import distribute, heads
from bert_tf.checkpoints import Checkpoint, assign_weights
from bert_tf.encoder import BertEncoder
from bert_tf.init_checkpoint import weights_sha256
from bert_tf.optimization import create_optimizer
from bert_tf.tokenization import BertTokenizer
from glue_suite import metrics as glue_metrics
from glue_suite import batching, frozen_features, readers, squad_postprocess, timings
from glue_suite.tasks import (CLASSIFICATION, KINDS, MULTIPLE_CHOICE, REGRESSION, SPAN,
                              TOKEN, TaskSpec)

logger = logging.getLogger(__name__)

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
NUM_CHOICES = 4
PRECISIONS = ("float32", "mixed_bfloat16")
HEADS = ("dense", "bilstm")
BILSTM_LAYERS = 2  # the paper's feature-based NER model (Section 5.3)
# Per-position logits (span, token) at padding positions: no softmax or argmax picks it,
# and it is the same however much padding a batch has (glue_suite.batching trims it).
PADDING_LOGIT = -1e9


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """Hyperparameters of one fine-tuning run.

    Args:
        learning_rate: peak learning rate.
        epochs: passes over the training features.
        batch_size: global batch (SWAG: questions, each 4 sequences).
        seed: seeds head initialisation, dropout and shuffling.
        warmup_proportion: share of the steps with linear warmup (BERT: 0.1).
        weight_decay: AdamW decay, not on LayerNorm or biases (BERT: 0.01).
        clipnorm: global gradient norm clip (BERT: 1.0); None: no clipping.
        dropout: dropout in the encoder and before the head (BERT: 0.1).
        optimizer: "adamw" or "lamb".
        eval_batch_size: batch size of prediction (and of a feature-based run's encoder pass).
        verbose: Keras progress bar (1), one line per epoch (2), silent (0).
        run_eagerly: no tf.function graphs (debugging; tiny models start faster).
        jit_compile: XLA for the train and predict steps (Keras's "auto" would turn it
            on). Off by default: on this CPU XLA compiled each length bucket's shape for
            ~30 s (BERT-Large) and ran BERT-Base steps slower than TensorFlow's oneDNN
            kernels (results/benchmark/README.md). A TPU compiles with XLA regardless.
        head: "dense" (BERT's) or "bilstm" (a BiLSTM over the fine-tuned sequence_output).
        feature_mode: None (fine-tune) or a `heads.FEATURE_MODES` entry (frozen encoder,
            cached layers: glue_suite.frozen_features).
        bilstm_units: LSTM units per direction of the BiLSTM head (paper: 768).
        length_multiple: batches are cut to their longest row rounded up to this multiple
            (glue_suite.batching; training batches group rows of similar length); 0: every
            batch padded to max_seq_length, as TPUs need.
    """
    learning_rate: float
    epochs: int
    batch_size: int
    seed: int = 0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clipnorm: Optional[float] = 1.0
    dropout: float = 0.1
    optimizer: str = "adamw"
    eval_batch_size: int = 64
    verbose: int = 1
    run_eagerly: bool = False
    jit_compile: bool = False
    head: str = "dense"
    feature_mode: Optional[str] = None
    bilstm_units: int = 768
    length_multiple: int = 8


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------

def build_encoder(checkpoint: Checkpoint, dropout: float = 0.1,
                  dtype: Optional[str] = None) -> BertEncoder:
    """The checkpoint's encoder with BERT's fine-tuning dropout, in `dtype` (a Keras
    dtype policy name; None = the global policy)."""
    config = checkpoint.config.replace(hidden_dropout_prob=dropout,
                                       attention_probs_dropout_prob=dropout)
    encoder = BertEncoder(config, dtype=dtype, name="encoder")
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


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

def model_inputs(features: dict) -> dict:
    return {name: features[name] for name in INPUT_NAMES}


def training_tuple(features: dict, kind: str) -> tuple:
    """(inputs, targets) or (inputs, targets, sample weights) for `Model.fit`."""
    if kind == SPAN:
        return model_inputs(features), {"start_logits": features["start_positions"],
                                        "end_logits": features["end_positions"]}
    if kind == TOKEN:
        return model_inputs(features), features["labels"], features["label_weights"]
    return model_inputs(features), features["labels"]


# ---------------------------------------------------------------------------------------
# Training and prediction
# ---------------------------------------------------------------------------------------

def train_steps(num_features: int, settings: TrainSettings) -> tuple[int, int]:
    """(total optimizer steps, warmup steps) of a run."""
    total = math.ceil(num_features / settings.batch_size) * settings.epochs
    return total, int(total * settings.warmup_proportion)


def encode_frozen(checkpoint: Checkpoint, features: dict, settings: TrainSettings,
                  dtype: Optional[str] = None, cache_dir: Optional[str] = None
                  ) -> tuple[frozen_features.LayerCache, dict]:
    """A feature-based run's layers of one split: the layers `settings.feature_mode` reads,
    of `features` through the checkpoint's encoder once (frozen_features.encode; with
    cache_dir, from the files an earlier run of any mode wrote there)."""
    encoder = build_encoder(checkpoint, dtype=dtype)
    layers = frozen_features.read_layers(settings.feature_mode,
                                         checkpoint.config.num_hidden_layers)
    key = {"weights_sha256": weights_sha256(checkpoint.weights),
           "dtype": encoder.dtype_policy.name}
    return frozen_features.encode(encoder, features, layers, settings.eval_batch_size,
                                  settings.length_multiple, cache_dir, key)


def restore_model(spec: TaskSpec, checkpoint: Checkpoint, settings: TrainSettings,
                  max_seq_length: int, weights: str,
                  strategy: Optional[tf.distribute.Strategy] = None,
                  dtype: Optional[str] = None,
                  train_layers: Optional[frozen_features.LayerCache] = None) -> keras.Model:
    """The model `fine_tune` trains with these settings, its weights read from `weights`
    (a `save_weights` file of such a model): a finished grid point, rebuilt."""
    strategy = distribute.for_keras_fit(strategy or tf.distribute.get_strategy())
    with strategy.scope():
        model = _trained_model(spec, checkpoint, settings, max_seq_length, dtype, train_layers)
        model.load_weights(weights)
    return model


def _trained_model(spec: TaskSpec, checkpoint: Checkpoint, settings: TrainSettings,
                   max_seq_length: int, dtype: Optional[str],
                   train_layers: Optional[frozen_features.LayerCache]) -> keras.Model:
    """The model `fine_tune` trains: encoder + task head, or a feature-based run's tagger."""
    # Trimmed batches vary in length: the model takes any (None).
    seq_length = None if settings.length_multiple else max_seq_length
    if settings.feature_mode:
        return build_tagger(spec, train_layers.num_layers, train_layers.hidden_size,
                            settings.feature_mode, settings.bilstm_units, settings.dropout,
                            dtype)
    return build_model(spec, build_encoder(checkpoint, settings.dropout, dtype), seq_length,
                       settings.dropout, dtype, settings.head, settings.bilstm_units)


def _train_dataset(spec: TaskSpec, train_features: dict, settings: TrainSettings,
                   train_layers: Optional[frozen_features.LayerCache],
                   drop_remainder: bool) -> tf.data.Dataset:
    """Its training batches: of the features, or of a feature-based run's cached layers."""
    if settings.feature_mode:
        return frozen_features.train_dataset(train_layers, train_features, settings.batch_size,
                                             settings.seed, settings.length_multiple,
                                             drop_remainder)
    return batching.train_dataset(training_tuple(train_features, spec.kind),
                                  settings.batch_size, settings.seed, settings.length_multiple,
                                  drop_remainder)


def build_variables_before_fit(model: keras.Model, dataset: tf.data.Dataset) -> None:
    """Creates the optimizer's slots and the loss trackers from one batch, as `fit` does
    itself under a strategy's scope (Keras's Trainer._symbolic_build). Without a scope
    (`distribute.for_keras_fit`) Keras leaves them to the first train step, and a
    tf.function that creates variables is traced twice: +7 s on SST-2 here."""
    model._symbolic_build(data_batch=next(iter(dataset.take(1))))


def one_iterator_per_fit(dataset: tf.data.Dataset) -> tuple[tf.data.Dataset, int]:
    """(the dataset repeated, its batches per epoch): `Model.fit(repeated,
    steps_per_epoch=...)` reads every epoch from one iterator.

    Given a finite dataset, Keras makes a new iterator at each epoch's start and deletes
    the ended one, and deleting a tf.data iterator can block the main thread for up to a
    minute (measured on RTE: 35-58 s at 3 of 6 epoch starts; results/benchmark/README.md;
    `distribute.for_keras_fit` avoids the usual cause, this the deletions themselves).
    Every epoch is still a new shuffle of every row: each pass of the repeat draws the
    shuffles' next seeds, as a new iterator does (tests/test_batching.py). (The orders
    after the first epoch differ from before, when Keras also made, and threw away, an
    iterator at each epoch's end: on RTE, epoch 1's loss is unchanged to the last digit.)
    """
    return dataset.repeat(), int(dataset.cardinality())


def fine_tune(spec: TaskSpec, checkpoint: Checkpoint, train_features: dict,
              settings: TrainSettings, max_seq_length: int,
              strategy: Optional[tf.distribute.Strategy] = None,
              dtype: Optional[str] = None,
              train_layers: Optional[frozen_features.LayerCache] = None
              ) -> tuple[keras.Model, dict]:
    """Builds the task model from `checkpoint` and trains it with `Model.fit`.

    With settings.feature_mode the model is the tagger (`build_tagger`), trained on the
    frozen encoder's layers of the training features: `train_layers` (`encode_frozen`;
    a grid shares them), else encoded here first.

    Returns:
        (model, history): history has the loss per epoch, steps, and seconds: building,
        the first step (tracing), the median step and the whole fit.
    """
    strategy = distribute.for_keras_fit(strategy or tf.distribute.get_strategy())
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    if tpu and settings.length_multiple:
        raise ValueError("TPUs need static shapes: pass length_multiple=0 (batches padded "
                         "to max_seq_length)")
    keras.utils.set_random_seed(settings.seed)
    num_features = len(train_features["input_ids"])
    if num_features == 0:
        raise ValueError(f"task {spec.name}: no training features")
    num_train_steps, num_warmup_steps = train_steps(num_features, settings)
    if settings.feature_mode and train_layers is None:
        train_layers, _ = encode_frozen(checkpoint, train_features, settings, dtype)
    began = time.perf_counter()
    with strategy.scope():
        model = _trained_model(spec, checkpoint, settings, max_seq_length, dtype, train_layers)
        optimizer = create_optimizer(settings.learning_rate, num_train_steps,
                                     num_warmup_steps, weight_decay=settings.weight_decay,
                                     clipnorm=settings.clipnorm,
                                     optimizer=settings.optimizer)
        compile_model(model, spec.kind, optimizer, settings.run_eagerly, settings.jit_compile)
        # TPUs need static batch shapes: no trimming, the last partial batch dropped.
        dataset = _train_dataset(spec, train_features, settings, train_layers,
                                 drop_remainder=tpu)
        build_variables_before_fit(model, dataset)
    build_seconds = time.perf_counter() - began
    logger.info("training %s: %d features, batch %d, %d epochs = %d steps (%d warmup), "
                "lr %g, seed %d, %s", spec.name, num_features, settings.batch_size,
                settings.epochs, num_train_steps, num_warmup_steps, settings.learning_rate,
                settings.seed, f"length-bucketed (multiples of {settings.length_multiple})"
                if settings.length_multiple else f"padded to {max_seq_length}")
    if settings.feature_mode:
        logger.info("feature-based (%s): the tagger trains on the cached encoder outputs %s",
                    settings.feature_mode, train_layers.layers)
    clock = timings.StepClock()
    began = time.perf_counter()
    # shuffle=False: the dataset shuffles itself (seeded, again every epoch).
    repeated, steps_per_epoch = one_iterator_per_fit(dataset)
    history = model.fit(repeated, steps_per_epoch=steps_per_epoch, epochs=settings.epochs,
                        verbose=settings.verbose, shuffle=False, callbacks=[clock])
    seconds = time.perf_counter() - began
    return model, {"loss": [float(x) for x in history.history["loss"]],
                   "steps": num_train_steps, "warmup_steps": num_warmup_steps,
                   "seconds": round(seconds, 1),
                   "features_per_second": round(num_features * settings.epochs / seconds, 2),
                   "build_seconds": round(build_seconds, 2), **clock.summary()}


def predict(model: keras.Model, features: dict, batch_size: int, kind: str,
            length_multiple: int, verbose: int = 1,
            layers: Optional[frozen_features.LayerCache] = None):
    """Model outputs for every feature: logits / scores as numpy ([F, ...]; SQuAD a
    dict of start and end logits [F, T]), in feature order.

    Rows run sorted by length in trimmed batches (`batching.predict_by_length`; 0: [B, T]
    batches through Keras's predict, as TPUs need); per-position outputs (span and token
    kinds) hold PADDING_LOGIT at padding positions. With `layers` (the features' frozen
    layers, `encode_frozen`), `model` is a feature-based run's tagger and reads them
    (frozen_features.predict); its logits are PADDING_LOGIT outside the sentences.
    """
    if len(features["input_ids"]) == 0:
        raise ValueError("nothing to predict: no features")
    if layers is not None:
        return frozen_features.predict(model, layers, features, batch_size, length_multiple,
                                       PADDING_LOGIT, verbose)
    return batching.predict_by_length(model, model_inputs(features), batch_size,
                                      length_multiple, KIND_HEADS[kind].per_token,
                                      PADDING_LOGIT, verbose)


# ---------------------------------------------------------------------------------------
# Outputs -> predictions -> metrics
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SquadOptions:
    """Post-processing of SQuAD logits (the original's defaults)."""
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0


@dataclasses.dataclass
class Evaluation:
    """Predictions of one split and, if labelled, its metrics.

    Args:
        predictions: class ids [N] (classification, SWAG), scores [N] (STS-B), tag lists
            per sentence (NER) or `SquadPredictions`.
        metrics: the task's metrics in percent (empty for unlabelled splits).
        degenerate: every prediction is the same (see `metrics.is_degenerate`).
    """
    predictions: object
    metrics: dict
    degenerate: bool


def ner_tags(spec: TaskSpec, sentences: Sequence[readers.NerSentence], features: dict,
             logits: np.ndarray) -> list[list[str]]:
    """Token logits [F, T, L] -> one tag per word of every sentence (from the word's
    first piece; a word without pieces is tagged O)."""
    ids = np.argmax(logits, axis=-1)  # [F, T]
    tags = [["O"] * len(s.words) for s in sentences]
    rows, positions = np.nonzero(features["word_index"] >= 0)
    for f, t in zip(rows, positions):
        sentence = features["sentence_index"][f]
        tags[sentence][features["word_index"][f, t]] = spec.labels[ids[f, t]]
    return tags


def evaluate(spec: TaskSpec, examples: Sequence, features: dict, outputs, labelled: bool,
             tokenizer: Optional[BertTokenizer] = None,
             squad: Optional[SquadOptions] = None) -> Evaluation:
    """Decodes model outputs into predictions and scores them (if `labelled`).

    Args:
        spec: the task being evaluated (for SQuAD v2.0 with a v1.1-trained model,
            the v2.0 spec).
        examples, features: the split, as featurized.
        outputs: `predict(...)` of the features.
        labelled: the examples have gold labels.
        tokenizer: SQuAD: vocabulary and lower-casing for the text recovery.
        squad: SQuAD post-processing options.
    """
    if spec.kind == SPAN:
        squad = squad or SquadOptions()
        version_2 = spec.name == "squad2.0"
        result = squad_postprocess.postprocess(
            examples, features, outputs["start_logits"], outputs["end_logits"],
            tokenizer.vocab, tokenizer.lower_case, version_2=version_2,
            n_best_size=squad.n_best_size, max_answer_length=squad.max_answer_length,
            null_score_diff_threshold=squad.null_score_diff_threshold)
        scores = squad_postprocess.score(
            examples, result, version_2=version_2,
            null_score_diff_threshold=squad.null_score_diff_threshold) if labelled else {}
        degenerate = len(set(result.predictions.values())) <= 1
        return Evaluation(result, scores, degenerate)
    if spec.kind == TOKEN:
        tags = ner_tags(spec, examples, features, outputs)
        scores = glue_metrics.compute_metrics(
            spec.name, tags, [list(s.tags) for s in examples]) if labelled else {}
        return Evaluation(tags, scores, glue_metrics.is_degenerate(
            [t for sentence in tags for t in sentence]))
    predictions = outputs if spec.kind == REGRESSION else np.argmax(outputs, axis=-1)
    scores = glue_metrics.compute_metrics(
        spec.name, predictions, readers.example_labels(spec.name, examples)) if labelled else {}
    return Evaluation(predictions, scores, glue_metrics.is_degenerate(predictions))


# ---------------------------------------------------------------------------------------
# Grid of learning rates x seeds
# ---------------------------------------------------------------------------------------

def _value(metrics: dict, name: str) -> float:
    """The metric as a float for ranking; NaN and missing rank last."""
    value = metrics.get(name)
    return -math.inf if value is None or not math.isfinite(value) else float(value)


def summarize_grid(runs: Sequence[dict], main_metric: str) -> dict:
    """Best run on dev and mean +- std over seeds for each learning rate.

    Args:
        runs: [{"learning_rate", "seed", "metrics": {...}, "degenerate": bool}, ...].
        main_metric: the metric that ranks runs (`TaskSpec.main_metric`).

    Returns:
        {"main_metric", "best": index into runs, "best_learning_rate", "best_seed",
         "best_value", "by_learning_rate": [{"learning_rate", "runs", "degenerate_runs",
         "mean": {metric: value}, "std": {metric: sample std, 0 for one run}}],
         "degenerate_runs": [indices]}. NaN metrics (e.g. Pearson of a constant) rank last
         and are left out of means.
    """
    if not runs:
        raise ValueError("no runs to summarize")
    best = max(range(len(runs)), key=lambda i: (_value(runs[i]["metrics"], main_metric), -i))
    by_lr = []
    for lr in dict.fromkeys(r["learning_rate"] for r in runs):  # first-seen order
        group = [r for r in runs if r["learning_rate"] == lr]
        mean, std = {}, {}
        for name in group[0]["metrics"]:
            values = np.array([r["metrics"].get(name) for r in group], np.float64)
            values = values[np.isfinite(values)]
            mean[name] = float(values.mean()) if len(values) else float("nan")
            std[name] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        by_lr.append({"learning_rate": lr, "runs": len(group),
                      "degenerate_runs": sum(bool(r["degenerate"]) for r in group),
                      "mean": mean, "std": std})
    return {"main_metric": main_metric, "best": best,
            "best_learning_rate": runs[best]["learning_rate"],
            "best_seed": runs[best]["seed"],
            "best_value": runs[best]["metrics"].get(main_metric),
            "by_learning_rate": by_lr,
            "degenerate_runs": [i for i, r in enumerate(runs) if r["degenerate"]]}
