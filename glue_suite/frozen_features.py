"""Feature-based runs (paper Table 7) on cached layers: the frozen encoder reads each split
once, and the tagger (FeatureCombiner -> 2-layer BiLSTM -> tags, `task_models.build_tagger`)
trains every epoch, of every run of the grid, on what it wrote down.

    features ─► frozen encoder, once per split ─► LayerCache ─► batches ─► tagger ─► logits
                (inference mode, rows sorted      (the mode's layers at     [B, S, L], put back
                 by length, batches trimmed)       the sentences' pieces,   at the sentences'
                                                   float16, no padding)     window positions

What the tagger reads: the layers at the target sentence's own pieces (`sentence_mask`
of glue_suite.features). The document context around the sentence reaches it through
the encoder, which reads the whole window, as the paper puts it: "In the input to BERT
... we include the maximal document context" (Section 5.3). A CoNLL-2003 window holds
124 real tokens on average and its sentence 18 pieces, so a cache of whole windows would
be 7x larger (concat_last_four of MiniLM over train, dev and test: 7.4 GiB in float16,
against 1.1 GiB) and the BiLSTM 7x slower. `task_models.build_feature_model` is the same
tagger on the encoder's outputs in one model; tests/test_frozen_features.py holds the
two to the same logits.

The cache keeps only the K layers the mode reads (`heads.feature_layers`), row after row
([N, K, H] for N sentence pieces), in float16: half of float32's memory, and its relative
rounding error (at most 2^-11 = 4.9e-4) is below what the BiLSTM can learn from (the
layers are LayerNorm outputs of order 1; float16's range, 6.5e4, is never approached).
With a cache directory, every layer of the encoder also goes to a file there, so that
the other modes' runs on the same checkpoint and rows read theirs instead of running the
encoder (`encode`; MiniLM on all of CoNLL-2003: 7 layers, 1.9 GiB).

The tagger sees each row's sentence left-aligned ("aligned" arrays [F, T]: position j is
the sentence's j-th piece). Its training batches are glue_suite.batching's (shuffled with
the run's seed, again every epoch; rows of similar sentence length together, each batch
cut to its longest) over row indices, and each batch's layers are gathered from the cache
as it is read. No dropout touches the frozen layers, here or in the one-model path; the
BiLSTM's own dropout is the same layer in both.
"""
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import time
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from bert_tf import heads
from bert_tf.encoder import BertEncoder
from bert_tf.files import atomic_path
from glue_suite import batching

logger = logging.getLogger(__name__)

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
STORAGE_DTYPE = np.float16  # the module docstring says why
# Bump when what the layer files (`encode`'s cache_dir) hold changes for the same key.
LAYER_FILES_VERSION = 1


def read_layers(feature_mode: str, num_hidden_layers: int) -> tuple:
    """The encoder_outputs indices `feature_mode` reads; warns where a "last four" mode
    finds fewer than four blocks (smoke-test models still run, on all their outputs)."""
    if feature_mode.endswith("last_four") and num_hidden_layers < 4:
        logger.warning("feature_mode %s on a %d-layer encoder: uses all its %d outputs, "
                       "the embeddings included", feature_mode, num_hidden_layers,
                       num_hidden_layers + 1)
    return heads.feature_layers(feature_mode, num_hidden_layers + 1)


@dataclasses.dataclass(frozen=True)
class LayerCache:
    """The frozen encoder's layers at every row's sentence pieces, rows end to end.

    Args:
        values: [N, K, H] STORAGE_DTYPE, N = the sentence pieces of all F rows.
        row_splits: int64 [F + 1]; row f is values[row_splits[f]:row_splits[f + 1]].
        layers: the K encoder_outputs indices stored (`read_layers`).
    """
    values: np.ndarray
    row_splits: np.ndarray
    layers: tuple

    @property
    def num_layers(self) -> int:
        return self.values.shape[1]

    @property
    def hidden_size(self) -> int:
        return self.values.shape[2]

    def gather(self, rows: np.ndarray, length: int) -> np.ndarray:
        """float32 [R, length, K, H]: `rows`, each left-aligned and zero-padded."""
        out = np.zeros((len(rows), length, self.num_layers, self.hidden_size), np.float32)
        for i, row in enumerate(rows):
            begin, end = self.row_splits[row], self.row_splits[row + 1]
            out[i, :end - begin] = self.values[begin:end]
        return out


# ---------------------------------------------------------------------------------------
# Sentence positions: window <-> left-aligned
# ---------------------------------------------------------------------------------------

def sentence_spans(sentence_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start [F], length [F]) of each row's sentence: one run of 1s in its [F, T] mask."""
    lengths = sentence_mask.sum(-1).astype(np.int64)
    starts = np.where(lengths > 0, np.argmax(sentence_mask, -1), 0)
    return starts, lengths


def left_aligned(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A per-position array [F, T] with each row's sentence moved to its front; 0 after."""
    positions = np.arange(values.shape[1])
    index = np.minimum(starts[:, None] + positions, values.shape[1] - 1)
    aligned = np.take_along_axis(values, index, axis=1)
    return np.where(positions < lengths[:, None], aligned, 0).astype(values.dtype)


def in_window(aligned: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
              fill: float) -> np.ndarray:
    """`left_aligned`'s inverse for outputs [F, T, ...]: each sentence back at its window
    positions, `fill` everywhere else."""
    out = np.full_like(aligned, fill)
    rows = np.repeat(np.arange(len(aligned)), lengths)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, starts[rows] + offsets] = aligned[rows, offsets]
    return out


# ---------------------------------------------------------------------------------------
# The encoder, once per split
# ---------------------------------------------------------------------------------------

def encoder_pass(encoder: BertEncoder, features: dict, layers: tuple, batch_size: int,
                 length_multiple: int, sinks: list) -> None:
    """Every row of `features` through the frozen encoder once (inference mode: no
    dropout), in length-sorted trimmed batches (`batching.sorted_batches`); layer
    layers[k] at the rows' sentence pieces goes to sinks[k] ([N, H] arrays, rows end to
    end, in memory or memory-mapped files)."""
    starts, lengths = sentence_spans(features["sentence_mask"])
    row_splits = np.concatenate([[0], np.cumsum(lengths)])
    signature = {name: tf.TensorSpec([None, None], tf.int32) for name in ENCODER_INPUTS}

    @tf.function(input_signature=[signature])  # one trace for every batch shape
    def forward(batch):
        outputs = encoder(batch, training=False)["encoder_outputs"]
        return tf.cast(tf.stack([outputs[i] for i in layers], axis=2), STORAGE_DTYPE)

    inputs = {name: features[name] for name in ENCODER_INPUTS}
    for length, rows in batching.sorted_batches(features["input_mask"], batch_size,
                                                length_multiple):
        batch = batching.trimmed_rows(inputs, rows, length)
        hidden = forward({k: tf.constant(v) for k, v in batch.items()}).numpy()  # [R, t, K, H]
        for i, row in enumerate(rows):
            sentence = hidden[i, starts[row]:starts[row] + lengths[row]]          # [n, K, H]
            for k, sink in enumerate(sinks):
                sink[row_splits[row]:row_splits[row + 1]] = sentence[:, k]


def encode(encoder: BertEncoder, features: dict, layers: tuple, batch_size: int,
           length_multiple: int, cache_dir: Optional[str] = None,
           encoder_key: Optional[dict] = None) -> tuple[LayerCache, dict]:
    """The LayerCache of `features`: `layers` at the rows' sentence pieces.

    Args:
        encoder: run in inference mode (no dropout), whatever its trainable flag.
        features: NER features (glue_suite.features.ner_features).
        layers: encoder_outputs indices (`read_layers`).
        batch_size, length_multiple: of the encoder pass (`encoder_pass`).
        cache_dir: None: in memory only. Else each of the encoder's L + 1 layers is also a
            file there, keyed by `encoder_key` and the features (`_layer_files`): a run of
            any mode on the same checkpoint and rows reads the layers it needs from them
            instead of running the encoder; a miss runs it once and writes every layer.
        encoder_key: what the encoder's outputs depend on besides the features, e.g. its
            weights' sha256 and dtype policy (needed with cache_dir).

    Returns:
        (cache, stats): stats {"rows", "tokens", "layers", "megabytes", "seconds",
        "rows_per_second", "from_disk"} for metrics.json.
    """
    if cache_dir and encoder_key is None:
        raise ValueError("a layer cache directory needs the encoder's key (encoder_key)")
    began = time.perf_counter()
    starts, lengths = sentence_spans(features["sentence_mask"])
    row_splits = np.concatenate([[0], np.cumsum(lengths)])
    values = np.zeros((row_splits[-1], len(layers), encoder.config.hidden_size),
                      STORAGE_DTYPE)
    from_disk = False
    if cache_dir:
        files = _layer_files(cache_dir, encoder_key, features, encoder.config.num_hidden_layers)
        from_disk = _read_layers(files, layers, values)
        if not from_disk:
            _write_layers(encoder, features, files, batch_size, length_multiple, values, layers)
    else:
        encoder_pass(encoder, features, layers, batch_size, length_multiple,
                     [values[:, k] for k in range(len(layers))])
    seconds = time.perf_counter() - began
    cache = LayerCache(values, row_splits, tuple(layers))
    return cache, {"rows": len(starts), "tokens": int(row_splits[-1]), "layers": list(layers),
                   "megabytes": round(values.nbytes / 2 ** 20, 1), "seconds": round(seconds, 2),
                   "rows_per_second": round(len(starts) / max(seconds, 1e-9), 1),
                   "from_disk": from_disk}


def _layer_files(cache_dir: str, encoder_key: dict, features: dict,
                 num_hidden_layers: int) -> list[str]:
    """The L + 1 layer files ([N, H] .npy each) of these features under this encoder."""
    digest = hashlib.sha256()
    digest.update(json.dumps({**encoder_key, "storage": np.dtype(STORAGE_DTYPE).name,
                              "version": LAYER_FILES_VERSION}, sort_keys=True).encode())
    for name in (*ENCODER_INPUTS, "sentence_mask"):
        digest.update(np.ascontiguousarray(features[name], np.int32).tobytes())
    directory = os.path.join(cache_dir, "frozen_layers", digest.hexdigest()[:16])
    return [os.path.join(directory, f"layer_{i}.npy") for i in range(num_hidden_layers + 1)]


def _read_layers(files: list[str], layers: tuple, values: np.ndarray) -> bool:
    """Fills values [N, K, H] from the files of `layers`; False if one is missing or
    unreadable (the encoder pass then rewrites all of values)."""
    shape = (values.shape[0], values.shape[2])
    try:
        for k, i in enumerate(layers):
            stored = np.load(files[i], mmap_mode="r")
            if stored.shape != shape or stored.dtype != values.dtype:
                raise ValueError(f"{files[i]} holds {stored.dtype} {stored.shape}, not "
                                 f"{values.dtype} {shape}")
            values[:, k] = stored
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:  # e.g. truncated: rebuilt, never trusted or fatal
        logger.warning("%s: unreadable layer cache (%s); running the encoder again",
                       os.path.dirname(files[0]), e)
        return False
    return True


def _write_layers(encoder: BertEncoder, features: dict, files: list[str], batch_size: int,
                  length_multiple: int, values: np.ndarray, layers: tuple) -> None:
    """One encoder pass that writes every layer's file (each appears whole or not at all)
    and fills values [N, K, H] with `layers`."""
    os.makedirs(os.path.dirname(files[0]), exist_ok=True)
    shape = (values.shape[0], values.shape[2])  # [N, H]
    with contextlib.ExitStack() as stack:
        temporaries = [stack.enter_context(atomic_path(path)) for path in files]
        sinks = [np.lib.format.open_memmap(tmp, "w+", STORAGE_DTYPE, shape)
                 for tmp in temporaries]
        encoder_pass(encoder, features, tuple(range(len(files))), batch_size,
                     length_multiple, sinks)
        for k, i in enumerate(layers):
            values[:, k] = sinks[i]
        for sink in sinks:
            sink.flush()
        del sink, sinks  # unmapped before the files move into place


# ---------------------------------------------------------------------------------------
# The tagger's batches and predictions
# ---------------------------------------------------------------------------------------

def _gather_layers(cache: LayerCache, rows: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """The cache's [B, S, K, H] of a batch's rows, S = its (trimmed) mask's width."""
    layers = tf.numpy_function(lambda r, m: cache.gather(r, m.shape[1]), [rows, mask],
                               tf.float32, stateful=False)
    return tf.ensure_shape(layers, [None, None, cache.num_layers, cache.hidden_size])


def train_dataset(cache: LayerCache, features: dict, batch_size: int, seed: int,
                  length_multiple: int, drop_remainder: bool = False) -> tf.data.Dataset:
    """The tagger's training batches ({"layers" [B, S, K, H], "sentence_mask" [B, S]},
    labels [B, S], label weights [B, S]), sentences left-aligned; rows drawn as
    `batching.train_dataset` draws any training rows, by sentence length."""
    starts, lengths = sentence_spans(features["sentence_mask"])
    aligned = {name: left_aligned(features[name], starts, lengths)
               for name in ("sentence_mask", "labels", "label_weights")}
    # batching sorts and trims by "input_mask": here the sentence's, what the BiLSTM reads.
    rows = ({"input_mask": aligned["sentence_mask"], "row": np.arange(len(starts))},
            aligned["labels"], aligned["label_weights"])

    def tagger_batch(inputs, labels, weights):
        return ({"layers": _gather_layers(cache, inputs["row"], inputs["input_mask"]),
                 "sentence_mask": inputs["input_mask"]}, labels, weights)

    return (batching.train_dataset(rows, batch_size, seed, length_multiple, drop_remainder)
            .map(tagger_batch).prefetch(tf.data.AUTOTUNE))


def predict(tagger: keras.Model, cache: LayerCache, features: dict, batch_size: int,
            length_multiple: int, fill: float, verbose: int = 1) -> np.ndarray:
    """The tagger's logits of every row, [F, T, L] at the sentences' window positions and
    `fill` elsewhere: what a token model's prediction gives (finetune.predict)."""
    starts, lengths = sentence_spans(features["sentence_mask"])
    mask = left_aligned(features["sentence_mask"], starts, lengths)
    signature = {"layers": tf.TensorSpec([None, None, cache.num_layers, cache.hidden_size]),
                 "sentence_mask": tf.TensorSpec([None, None], tf.int32)}
    forward = tf.function(lambda batch: tagger(batch, training=False),
                          input_signature=[signature])
    progress = keras.utils.Progbar(len(mask), verbose=verbose) if verbose else None
    groups, parts = [], []
    for length, rows in batching.sorted_batches(mask, batch_size, length_multiple):
        logits = forward({"layers": tf.constant(cache.gather(rows, length)),
                          "sentence_mask": tf.constant(mask[rows, :length])})
        groups.append(rows)
        parts.append(np.asarray(logits))
        if progress:
            progress.add(len(rows))
    aligned = batching.merge_rows(groups, parts, mask, per_position=True, fill=fill)
    return in_window(aligned, starts, lengths, fill)
