"""Pretraining records: the one home of their features, written and read back.

`create_pretraining_data` writes each `pretraining_instances.Instance` as a
tf.train.Example (`instance_to_example`); the trainer reads them with
`make_pretraining_dataset`. Every objective writes the original feature names and types,
so records from the original tools train here and ours train there:

  input_ids             int64 [max_seq_length]  token ids after masking, 0-padded
  input_mask            int64 [max_seq_length]  1 for real tokens, 0 for padding
  segment_ids           int64 [max_seq_length]  0 for [CLS] A [SEP], 1 for B [SEP], 0 pad
  masked_lm_positions   int64 [max_predictions_per_seq]  ascending positions, 0-padded
  masked_lm_ids         int64 [max_predictions_per_seq]  original ids there, 0-padded
  masked_lm_weights     float [max_predictions_per_seq]  1.0 per prediction, 0.0 pad
  next_sentence_labels  int64 [1]  1 = B is from another document, 0 = B follows A

(`pretraining_instances` has a worked example, and what each objective puts there.)

A set of records is `part-NNNNN-of-NNNNN.tfrecord` shards and a `metadata.json` beside
them, written last (the settings, the vocabulary and each shard's size): the set is
complete only when metadata.json exists. `check_records` compares a set with what a
pretraining run was given before the run writes anything.
"""

import logging
import os
import re
import struct

import tensorflow as tf

from bert_tf.cli import InputError
from bert_tf.distribute import without_autotune
from bert_tf.files import file_sha256, is_remote, read_json
from bert_tf.pretraining_instances import Instance
from bert_tf.tokenization import load_vocab

logger = logging.getLogger(__name__)

SHARD_PATTERN = "part-{:05d}-of-{:05d}.tfrecord"  # create_pretraining_data's shard names
_SHARD_NAME = re.compile(r"part-(\d{5})-of-(\d{5})\.tfrecord")
METADATA_FILE = "metadata.json"


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The original `run_pretraining.py` feature spec."""
    def ints(n):
        return tf.io.FixedLenFeature([n], tf.int64)

    return {
        "input_ids": ints(max_seq_length),
        "input_mask": ints(max_seq_length),
        "segment_ids": ints(max_seq_length),
        "masked_lm_positions": ints(max_predictions_per_seq),
        "masked_lm_ids": ints(max_predictions_per_seq),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": ints(1),
    }


def instance_to_example(instance: Instance, max_seq_length: int,
                        max_predictions_per_seq: int) -> tf.train.Example:
    """Pads an instance into the original feature names and types."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    n, k = len(instance.input_ids), len(instance.masked_lm_positions)
    pad, pad_predictions = [0] * (max_seq_length - n), [0] * (max_predictions_per_seq - k)
    features = {
        "input_ids": ints(instance.input_ids + pad),
        "input_mask": ints([1] * n + pad),
        "segment_ids": ints(instance.segment_ids + pad),
        "masked_lm_positions": ints(instance.masked_lm_positions + pad_predictions),
        "masked_lm_ids": ints(instance.masked_lm_ids + pad_predictions),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=[1.0] * k + [0.0] * len(pad_predictions))),
        "next_sentence_labels": ints([instance.next_sentence_label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def decode_record(serialized: tf.Tensor, max_seq_length: int,
                  max_predictions_per_seq: int) -> dict:
    """Serialized examples [B] -> features [B, T] / [B, P] / [B, 1], int64 -> int32.

    A scalar string gives unbatched features. int32 because TPUs do not take int64.
    """
    features = tf.io.parse_example(serialized,
                                   feature_spec(max_seq_length, max_predictions_per_seq))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in features.items()}


def make_pretraining_dataset(file_pattern: str, batch_size: int, max_seq_length: int,
                             max_predictions_per_seq: int, is_training: bool,
                             seed: int | None = None, pipeline: tuple = (0, 1),
                             batch_transform=None) -> tf.data.Dataset:
    """Batches of decoded pretraining records.

    Training: shards in a seeded random order, repeated, 8 read at a time and
    interleaved, then shuffled in a 1000-record buffer. Evaluation: shards in order,
    once. Batches always have the same size (drop_remainder) for static shapes (TPU).

    Args:
        file_pattern: comma-separated globs of TFRecord files.
        batch_size: the batch this pipeline yields (the global batch's share of its host).
        max_seq_length, max_predictions_per_seq: T and P of the records.
        is_training: shuffle and repeat.
        seed: the shuffle seed (fix it for reproducible runs and exact resumption).
        pipeline: (this pipeline's index, the number of pipelines), one per host
            (`bert_tf.distribute.InputLayout`): each reads its own subset of the shards
            (or of the records, if there are fewer shards than pipelines).
        batch_transform: a function of a batch of decoded features and a [2] seed that
            returns the batch to train on, applied after decoding with seeds from `seed`
            (0 for evaluation if None) and the pipeline's index: the masks of
            `bert_tf.dynamic_masking.DynamicMasking(...)`, or LTR's sampled next tokens
            (`pretraining_model.sample_next_token_positions`).
    """
    files = _list_files(file_pattern)
    index, num_pipelines = pipeline
    # Each input pipeline reads its own shards, or its own records if shards are too few.
    shard_records = 1 < num_pipelines > len(files)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1 and not shard_records:
        dataset = dataset.shard(num_pipelines, index)

    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(8, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
    if shard_records:
        dataset = dataset.shard(num_pipelines, index)
    if is_training:
        dataset = dataset.shuffle(1000, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(
        lambda records: decode_record(records, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE)
    if batch_transform is not None:
        dataset = _transform_batches(dataset, batch_transform, seed, is_training, pipeline)
    # A training iterator never ends: deleting it at a phase's end (or when a test lets it
    # go) stalled up to a minute under autotuning, which buys nothing here: on 2 cores this
    # pipeline gives 18,000-26,000 examples/s untuned with dynamic masking (17,000-19,000
    # autotuned), 100x what a CPU step consumes; untuned, parallel stages use every core
    # of the host (results/benchmark/pretrain_pipeline_autotune.py).
    return without_autotune(dataset.prefetch(tf.data.AUTOTUNE))


def _list_files(file_pattern: str, flag: str = "file_pattern") -> list[str]:
    """Comma-separated globs -> files, each glob's matches sorted."""
    files = []
    for pattern in filter(None, (p.strip() for p in file_pattern.split(","))):
        files += sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise InputError(file_pattern, None, f"{flag} matches no file")
    return files


def _transform_batches(dataset: tf.data.Dataset, batch_transform, seed: int | None,
                       is_training: bool, pipeline: tuple) -> tf.data.Dataset:
    """Maps `batch_transform` over the batches with a seed per batch from a seeded stream
    that is part of the iterator's state, so the masks (or samples) are reproducible and
    survive a checkpoint restore. Evaluation always gets the same ones. Each pipeline has
    its own stream: the same one on every host would mask the same positions in each
    host's rows."""
    stream_seed = 0 if seed is None and not is_training else seed
    if stream_seed is not None:
        index, num_pipelines = pipeline
        stream_seed = stream_seed * num_pipelines + index  # one pipeline: the seed itself
    seeds = tf.data.Dataset.random(seed=stream_seed).batch(2)  # [2] int64 per batch
    return tf.data.Dataset.zip(dataset, seeds).map(
        batch_transform, num_parallel_calls=tf.data.AUTOTUNE)


# ---------------------------------------------------------------------------------
# Checking a set of records against what a run was given.

def check_records(file_pattern: str, flag: str, max_seq_length: int,
                  max_predictions_per_seq: int, vocab_file: str | None,
                  dynamic_masking: bool = False) -> list[str]:
    """The files of `file_pattern`, after checking that they are whole and were made
    for these settings; InputError (one line, naming the file) otherwise.

    Refused: a glob that matches nothing; a directory of our shards that is not the
    whole set (not all N of `-of-N`, or no metadata.json: `create_pretraining_data`
    writes it last, so it was killed); a shard shorter than metadata.json says, or
    ending inside a record; records of another max_seq_length, max_predictions_per_seq,
    masking (`--dynamic_masking` records are unmasked) or vocabulary (size and sha256;
    not compared when `vocab_file` is None).

    Records without metadata.json and not named like ours (google-research/bert's tools
    name them freely) are read with a warning: their shapes are checked on their first
    record and their length by walking the record framing; their vocabulary cannot be.

    Args:
        file_pattern: comma-separated globs, as `make_pretraining_dataset` takes them.
        flag: the flag that gave them (e.g. "--phase2_train_files"), for messages.
        max_seq_length, max_predictions_per_seq: T and P the run reads them with.
        vocab_file: the vocabulary the run embeds their ids with.
        dynamic_masking: whether the run masks them itself.
    """
    files = _list_files(file_pattern, flag)
    wanted = {"max_seq_length": max_seq_length,
              "max_predictions_per_seq": max_predictions_per_seq,
              "dynamic_masking": dynamic_masking}
    if vocab_file:
        wanted.update(vocab_file=vocab_file, vocab_size=len(load_vocab(vocab_file)),
                      vocab_sha256=None if is_remote(vocab_file) else file_sha256(vocab_file))
    by_directory = {}
    for path in files:
        by_directory.setdefault(os.path.dirname(path), []).append(path)
    for directory, paths in by_directory.items():
        metadata_path, metadata = read_metadata(directory)
        sizes = _check_shard_set(directory, metadata_path, metadata)
        if metadata is None:
            logger.warning("%s: no %s beside these records (not made by "
                           "bert_tf.create_pretraining_data); their vocabulary is not "
                           "checked", directory or ".", METADATA_FILE)
        for path in paths:
            _check_length(path, sizes.get(os.path.basename(path)))
        if metadata is not None:
            source, held = metadata_path, _held_by_metadata(metadata)
        else:
            source, held = paths[0], _held_by_first_record(paths[0])
        _compare(source, held, wanted, flag)
    return files


def records_are_unmasked(file_pattern: str) -> bool:
    """Whether a set of records was written unmasked (`create_pretraining_data
    --dynamic_masking`), as the metadata.json beside its first file says. Records without
    one (the original tools write none) hold their masks."""
    _, metadata = read_metadata(os.path.dirname(_list_files(file_pattern)[0]))
    return metadata is not None and bool(_held_by_metadata(metadata)["dynamic_masking"])


def read_metadata(directory: str) -> tuple[str, dict | None]:
    """The path of a record directory's metadata.json and its content (None: there is none).
    Raises InputError, naming the file, if it is not a JSON object."""
    path = os.path.join(directory, METADATA_FILE)
    return path, _read_json(path) if tf.io.gfile.exists(path) else None


def _read_json(path: str) -> dict:
    value = read_json(path)
    if not isinstance(value, dict):
        raise InputError(path, None, "expected a JSON object; rerun create_pretraining_data")
    return value


def _check_shard_set(directory: str, metadata_path: str, metadata: dict | None) -> dict:
    """{shard name: bytes (None if not recorded)} of a complete set of our shards; {}
    for records that are not ours (neither our names nor metadata.json)."""
    names = [os.path.basename(p) for p in
             tf.io.gfile.glob(os.path.join(directory, "part-*-of-*.tfrecord"))]
    ours = [n for n in names if _SHARD_NAME.fullmatch(n)]
    if metadata is None and not ours:
        return {}
    if metadata is None:
        raise InputError(metadata_path, None, f"missing beside {len(ours)} shards "
                         "part-*-of-*.tfrecord: create_pretraining_data writes it last, so "
                         "the set is incomplete (was the run killed?); rerun it with "
                         "--overwrite")
    listed = {s["file"]: s.get("bytes") for s in metadata.get("shards", [])}
    whole = {SHARD_PATTERN.format(j, len(listed)) for j in range(len(listed))}  # -of-N
    missing, others = sorted(whole - set(ours)), sorted(set(ours) - whole)
    if missing or others or set(listed) != whole:
        raise InputError(metadata_path, None, (
            f"lists {len(listed)} shards, {len(whole) - len(missing)} of them are in "
            f"{directory or '.'}" + (f" (missing: {', '.join(missing[:3])})" if missing else "")
            + (f", and {len(others)} other shards are ({', '.join(others[:3])})"
               if others else "") + "; rerun create_pretraining_data with --overwrite"))
    return listed


def _check_length(path: str, expected_bytes: int | None) -> None:
    """A shard is as long as metadata.json says or, without that, its last record ends
    where the file does (a TFRecord is a uint64 length, a 4-byte CRC, the data, a
    4-byte CRC; walking the lengths costs ~2 us per record). Remote files: not checked."""
    if is_remote(path):
        return
    size = os.path.getsize(path)
    if expected_bytes is not None:
        if size != expected_bytes:
            raise InputError(path, None, f"{size} bytes, but {METADATA_FILE} says "
                             f"{expected_bytes}: truncated or replaced; rerun "
                             f"create_pretraining_data with --overwrite")
        return
    start = 0
    with open(path, "rb") as f:
        while start < size:
            f.seek(start)
            header = f.read(8)
            end = start + 16 + struct.unpack("<Q", header)[0] if len(header) == 8 else None
            if end is None or end > size:
                raise InputError(path, None, f"truncated: the record at byte {start} runs "
                                 f"past the end of the file ({size} bytes)")
            start = end


def _held_by_metadata(metadata: dict) -> dict:
    config = metadata.get("config", {})
    return {"max_seq_length": config.get("max_seq_length"),
            "max_predictions_per_seq": config.get("max_predictions_per_seq"),
            "dynamic_masking": config.get("dynamic_masking", False),
            "vocab_file": metadata.get("vocab_file"), "vocab_size": metadata.get("vocab_size"),
            "vocab_sha256": metadata.get("vocab_sha256")}


def _held_by_first_record(path: str) -> dict:
    """T and P from the first record's feature lengths (records without metadata.json)."""
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if first is None:
        raise InputError(path, None, "holds no records")
    feature = tf.train.Example.FromString(first.numpy()).features.feature
    lacking = [n for n in ("input_ids", "masked_lm_positions") if n not in feature]
    if lacking:
        raise InputError(path, None, f"not a BERT pretraining record: the first record "
                                     f"lacks {', '.join(lacking)}")
    return {"max_seq_length": len(feature["input_ids"].int64_list.value),
            "max_predictions_per_seq": len(feature["masked_lm_positions"].int64_list.value)}


def _describe(settings: dict, keys: list[str]) -> str:
    parts = []
    for key in keys:
        if key == "dynamic_masking":
            parts.append("unmasked (for --dynamic_masking)" if settings[key] else
                         "masked (no --dynamic_masking)")
        elif key == "vocab":
            sha = (settings.get("vocab_sha256") or "not recorded")[:12]
            parts.append(f"vocab {settings['vocab_file']} (sha256 {sha}, "
                         f"{settings['vocab_size']} ids)")
        else:
            parts.append(f"{key} {settings[key]}")
    return ", ".join(parts)


def _compare(source: str, held: dict, wanted: dict, flag: str) -> None:
    """One InputError that says what the records hold and what differs of what was given."""
    differ = [k for k in ("max_seq_length", "max_predictions_per_seq", "dynamic_masking")
              if k in held and held[k] != wanted[k]]
    if held.get("vocab_size") is not None and "vocab_size" in wanted:
        shas = (held.get("vocab_sha256"), wanted["vocab_sha256"])
        if held["vocab_size"] != wanted["vocab_size"] or (all(shas) and shas[0] != shas[1]):
            differ.append("vocab")
    if not differ:
        return
    shown = ["max_seq_length", "max_predictions_per_seq"] + [
        k for k in ("dynamic_masking", "vocab") if k in differ or (
            k == "vocab" and held.get("vocab_size") is not None)]
    raise InputError(source, None, f"records hold {_describe(held, shown)}; pretrain was "
                                   f"given {_describe(wanted, differ)} for {flag}")
