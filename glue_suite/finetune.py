"""Fine-tuning: a task model (glue_suite.task_models) trained with BERT's optimizer
through Keras's fit, and its outputs on a split.

    features (glue_suite.features) -> tf.data (glue_suite.batching) -> keras.Model.fit
    -> predict -> glue_suite.scoring

feature_mode (Table 7's feature-based NER): the encoder is frozen and run in inference
mode, once per split (`encode_frozen`; glue_suite.frozen_features caches the layers the
mode reads), and what trains is the tagger on those layers (`task_models.build_tagger`).
"""

import dataclasses
import logging
import math
import time
from typing import Optional

import keras
import tensorflow as tf

from bert_tf import distribute
from bert_tf.checkpoints import Checkpoint
from bert_tf.init_checkpoint import weights_sha256
from bert_tf.optimization import create_optimizer
from glue_suite import batching, frozen_features, timings
from glue_suite.task_models import (KIND_HEADS, PADDING_LOGIT, build_encoder, build_model,
                                    build_tagger, compile_model, model_inputs)
from glue_suite.tasks import SPAN, TOKEN, TaskSpec

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "mixed_bfloat16")


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
        verbose: Keras progress bar (1), one line per epoch and a log line a minute
            (2, for log files: timings.ProgressLog), silent (0).
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
            (glue_suite.batching; training batches group rows of similar length): 1 without
            XLA, where one trace serves every length; under XLA, which compiles each,
            batching.XLA_LENGTH_MULTIPLE; 0: every batch padded to max_seq_length, as TPUs
            need.
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
    length_multiple: int = 1


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

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


def _padding_description(length_multiple: int, max_seq_length: int) -> str:
    """How fine_tune's batches are padded, for its log line."""
    if not length_multiple:
        return f"padded to {max_seq_length}"
    if length_multiple == 1:
        return "length-bucketed, each batch cut to its longest row"
    return f"length-bucketed, each batch cut to a multiple of {length_multiple}"


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
                settings.seed, _padding_description(settings.length_multiple, max_seq_length))
    if settings.feature_mode:
        logger.info("feature-based (%s): the tagger trains on the cached encoder outputs %s",
                    settings.feature_mode, train_layers.layers)
    clock = timings.StepClock()
    began = time.perf_counter()
    # shuffle=False: the dataset shuffles itself (seeded, again every epoch).
    repeated, steps_per_epoch = one_iterator_per_fit(dataset)
    callbacks = [clock]
    if settings.verbose == 2:
        callbacks.append(timings.ProgressLog(steps_per_epoch * settings.epochs))
    history = model.fit(repeated, steps_per_epoch=steps_per_epoch, epochs=settings.epochs,
                        verbose=settings.verbose, shuffle=False, callbacks=callbacks)
    seconds = time.perf_counter() - began
    return model, {"loss": [float(x) for x in history.history["loss"]],
                   "steps": num_train_steps, "warmup_steps": num_warmup_steps,
                   # The precision of trace_seconds, so that seconds - trace (the steps
                   # after the first, glue_suite.timings) cannot round below zero.
                   "seconds": round(seconds, 2),
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
