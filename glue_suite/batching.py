"""Batches without padding waste: features stay padded to max_seq_length T (as cached),
and each batch is cut to the length its longest row needs, rounded up to a multiple of
`length_multiple`. On the GLUE train sets 48-91% of a [B, 128] batch is padding (SST-2's
mean is 13 tokens), and the encoder's cost grows at least linearly with the length.

    training     shuffle the rows (seeded, again every epoch) -> chunks of CHUNK_BATCHES
                 batches -> sort each chunk by length -> cut into batches -> shuffle the
                 batches -> trim each batch
    prediction   sort the rows by length -> batches, each trimmed -> one traced forward
                 pass -> outputs back in row order, at length T (`predict_by_length`)

Every epoch still sees every row exactly once, in ceil(F / B) batches of B rows (one
partial batch, as without bucketing); a batch holds rows of similar length, drawn at random
from a chunk of B * CHUNK_BATCHES rows.

The encoder hides padding keys from every query, so a row's outputs at its real positions
do not depend on how much padding follows it (tests/test_batching.py compares logits).
Rounding bounds the distinct batch shapes by 2 * ceil(T / length_multiple) (full and
partial batches). Without XLA (Keras's default on CPU) one trace serves every shape, and
finer rounding wastes less (SST-2: 97% of the positions are real tokens at multiple 1,
77% at 8, 61% at 16, 39% at 32, 10% padded to 128), so glue_suite cuts each batch to its
longest row (multiple 1: CoLA's 63 training steps of 2,000 examples took 18.5 s against
23.8 s at multiple 8, results/benchmark/README.md); under XLA every new shape compiles
anew (measured here: 260 s for the first step of SST-2 at multiple 16, against 11 s of
tracing without XLA), so coarser rounding pays there (XLA_LENGTH_MULTIPLE).

length_multiple=0 keeps [B, T] batches: TPUs need static shapes, and their training drops
the last partial batch.

Every feature array is [F] (one value per row) or [F, ..., T] (per position, T last);
trimming cuts the second kind.

The pipelines slice arrays in memory and map nothing in parallel, so they run without
tf.data's autotuning (`distribute.without_autotune`: deleting an iterator it watched can
stall). Keras's fit deleted the epoch's iterator at each epoch's end: on RTE (78 batches an
epoch, ~2.5 min) the first step of 4 of 6 later epochs took 43-51 s instead of ~1 s. Keras
under a strategy adds an autotuned pipeline of its own that options do not reach, so
fine-tuning on one CPU runs without one (distribute.for_keras_fit) and reads all its epochs
from one iterator (finetune.one_iterator_per_fit).
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.distribute import without_autotune
from glue_suite import timings

# glue_suite's rounding under --jit_compile, where each new length compiles (~30 s for
# BERT-Large here) and 8 bounds the shapes to 2 * T / 8.
XLA_LENGTH_MULTIPLE = 8

# Rows sorted together: HF's group_by_length sorts "megabatches" of 50 batches, fairseq
# whole epochs. 100 batches keep batches random-ish while most rows find similar partners.
CHUNK_BATCHES = 100


def row_lengths(input_mask: np.ndarray) -> np.ndarray:
    """[F] real tokens per row of an [F, T] mask (SWAG [F, C, T]: its longest choice)."""
    lengths = np.asarray(input_mask).sum(-1)
    return lengths.max(-1) if lengths.ndim == 2 else lengths


def bucket_lengths(lengths: np.ndarray, length_multiple: int, max_seq_length: int) -> np.ndarray:
    """Lengths rounded up to a multiple of `length_multiple`, at least one multiple, at
    most max_seq_length."""
    rounded = -(-np.maximum(lengths, 1) // length_multiple) * length_multiple
    return np.minimum(rounded, max_seq_length)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------

def _per_position(t: tf.Tensor) -> bool:
    return t.shape.rank >= 2  # [B, ..., T]; [B] arrays (labels, positions) stay whole


def _tf_lengths(input_mask: tf.Tensor) -> tf.Tensor:
    lengths = tf.reduce_sum(input_mask, -1)                       # [B] or [B, C]
    return tf.reduce_max(lengths, -1) if lengths.shape.rank == 2 else lengths


def _sort_by_length(*batch):
    order = tf.argsort(_tf_lengths(batch[0]["input_mask"]), stable=True)
    return tf.nest.map_structure(lambda t: tf.gather(t, order), batch)


def _trimmer(length_multiple: int, max_seq_length: int):
    def trim(*batch):
        longest = tf.reduce_max(_tf_lengths(batch[0]["input_mask"]))
        length = tf.minimum(-(-tf.maximum(longest, 1) // length_multiple) * length_multiple,
                            max_seq_length)
        return tf.nest.map_structure(
            lambda t: t[..., :length] if _per_position(t) else t, batch)
    return trim


def train_dataset(data: tuple, batch_size: int, seed: int, length_multiple: int,
                  drop_remainder: bool = False) -> tf.data.Dataset:
    """Shuffled (again every epoch) batches of the training rows.

    Args:
        data: (inputs, targets[, sample weights]) of numpy arrays, inputs a dict with
            "input_mask" [F, T] (SWAG [F, C, T]).
        length_multiple: > 0: length-bucketed batches cut to their longest row, rounded
            up to this multiple (the module docstring); 0: [B, T] batches.
        drop_remainder: drop the last partial batch (TPUs; only with length_multiple=0).
    """
    num_rows, max_seq_length = data[0]["input_mask"].shape[0], data[0]["input_mask"].shape[-1]
    rows = (tf.data.Dataset.from_tensor_slices(data)
            .shuffle(num_rows, seed=seed, reshuffle_each_iteration=True))
    if not length_multiple:
        return without_autotune(rows.batch(batch_size, drop_remainder=drop_remainder)
                                .prefetch(tf.data.AUTOTUNE))
    if drop_remainder:
        raise ValueError("drop_remainder needs static shapes: pass length_multiple=0")
    # Chunks hold CHUNK_BATCHES whole batches, so only the epoch's last batch is partial.
    batches = (rows.batch(batch_size * CHUNK_BATCHES)
               .map(_sort_by_length)
               .unbatch()
               .batch(batch_size)
               # Sorted batches come out shortest first: mix them (over about one chunk) so
               # that length does not drift with the step. Seed + 1: not the rows' stream.
               .shuffle(CHUNK_BATCHES, seed=seed + 1, reshuffle_each_iteration=True)
               .map(_trimmer(length_multiple, max_seq_length))
               # unbatch() hides the count from tf.data; Keras needs it to end each epoch
               # without an extra, empty step.
               .apply(tf.data.experimental.assert_cardinality(-(-num_rows // batch_size)))
               .prefetch(tf.data.AUTOTUNE))
    return without_autotune(batches)


# ---------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------

def sorted_batches(input_mask: np.ndarray, batch_size: int,
                   length_multiple: int) -> list[tuple]:
    """Prediction batches: (trimmed length, row indices) of `batch_size` rows at a time,
    rows in length order, each batch cut to its longest row rounded up to
    `length_multiple`. length_multiple=0: rows in order, every batch at T."""
    max_seq_length = input_mask.shape[-1]
    if not length_multiple:
        order = np.arange(len(input_mask))
        return [(max_seq_length, order[i:i + batch_size])
                for i in range(0, len(order), batch_size)]
    lengths = row_lengths(input_mask)
    order = np.argsort(lengths, kind="stable")
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return [(int(bucket_lengths(lengths[rows].max(), length_multiple, max_seq_length)), rows)
            for rows in batches]


def trimmed_rows(features: dict, rows: np.ndarray, length: int) -> dict:
    """features[name][rows] of every array, per-position arrays cut to `length`."""
    return {name: value[rows][..., :length] if value.ndim >= 2 else value[rows]
            for name, value in features.items()}


def merge_rows(row_groups: list, parts: list, input_mask: np.ndarray, per_position: bool,
               fill: float) -> np.ndarray:
    """One output predicted batch by batch -> one float32 array in feature order.

    Args:
        row_groups: the row indices of each batch or group (`sorted_batches`).
        parts: each batch's outputs, [R, ...] or, `per_position`, [R, length, ...].
        input_mask: [F, T] of the features.
        per_position: the output has a position axis (span, token kinds): it is padded
            back to T, and every padding position gets `fill`, so that the outputs do not
            depend on how a batch was trimmed.
        fill: the value at padding positions (e.g. a logit no softmax or argmax picks).
    """
    num_rows, max_seq_length = input_mask.shape[0], input_mask.shape[-1]
    first = np.asarray(parts[0])
    if not per_position:
        out = np.zeros((num_rows, *first.shape[1:]), np.float32)
        for rows, values in zip(row_groups, parts):
            out[rows] = values
        return out
    out = np.full((num_rows, max_seq_length, *first.shape[2:]), fill, np.float32)
    for rows, values in zip(row_groups, parts):
        out[rows, :values.shape[1]] = values
    mask = input_mask.astype(bool).reshape(input_mask.shape + (1,) * (out.ndim - 2))
    return np.where(mask, out, np.float32(fill))


def _forward(model: keras.Model, inputs: dict):
    """model(inputs, training=False), traced once for batches of any size and length
    (Keras's predict traces again for each new shape until it relaxes them)."""
    signature = {name: tf.TensorSpec([None] * value.ndim, tf.as_dtype(value.dtype))
                 for name, value in inputs.items()}
    return tf.function(lambda batch: model(batch, training=False),
                       input_signature=[signature])


def predict_by_length(model: keras.Model, inputs: dict, batch_size: int,
                      length_multiple: int, per_position: bool, fill: float,
                      verbose: int = 1):
    """The model's outputs for every row, predicted in `sorted_batches` and merged back in
    row order (`merge_rows`).

    Args:
        inputs: the model's input arrays, with "input_mask" [F, T] (SWAG [F, C, T]).
        length_multiple: 0: [B, T] batches in row order through Keras's `predict` (and
            its distribution strategy, e.g. TPU).
        per_position, fill: as in `merge_rows`.
    """
    mask = inputs["input_mask"]
    if not length_multiple:
        dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)
        outputs = model.predict(without_autotune(dataset.prefetch(tf.data.AUTOTUNE)),
                                verbose=verbose)
        return keras.tree.map_structure(
            lambda out: merge_rows([np.arange(len(mask))], [out], mask, per_position, fill),
            outputs)
    forward = _forward(model, inputs)
    progress = keras.utils.Progbar(len(mask), verbose=verbose) if verbose else None
    line = timings.ProgressLine("predicted rows", len(mask)) if verbose == 2 else None
    rows, parts, done = [], [], 0
    for length, batch in sorted_batches(mask, batch_size, length_multiple):
        outputs = forward({k: tf.constant(v) for k, v in
                           trimmed_rows(inputs, batch, length).items()})
        parts.append(keras.tree.map_structure(np.asarray, outputs))
        rows.append(batch)
        done += len(batch)
        if progress:
            progress.add(len(batch))
        if line:
            line.update(done)
    return keras.tree.map_structure(
        lambda *outputs: merge_rows(rows, outputs, mask, per_position, fill), *parts)
