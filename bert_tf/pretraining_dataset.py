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
"""

import tensorflow as tf

from bert_tf.pretraining_instances import Instance


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
                             seed: int | None = None,
                             input_context: tf.distribute.InputContext | None = None,
                             dynamic_masking=None) -> tf.data.Dataset:
    """Batches of decoded pretraining records.

    Training: shards in a seeded random order, repeated, 8 read at a time and
    interleaved, then shuffled in a 1000-record buffer. Evaluation: shards in order,
    once. Batches always have the same size (drop_remainder) for static shapes (TPU).

    Args:
        file_pattern: comma-separated globs of TFRecord files.
        batch_size: the global batch size; with `input_context` each input pipeline
            yields batches of `input_context.get_per_replica_batch_size(batch_size)`.
        max_seq_length, max_predictions_per_seq: T and P of the records.
        is_training: shuffle and repeat.
        seed: the shuffle seed (fix it for reproducible runs and exact resumption).
        input_context: from `strategy.distribute_datasets_from_function`; each input
            pipeline then reads its own subset of the shards (or of the records, if
            there are fewer shards than pipelines).
        dynamic_masking: `bert_tf.dynamic_masking.DynamicMasking(...)` (or any function
            of a batch of features and a [2] seed), applied after decoding. Its seeds
            come from `seed` (0 for evaluation if None).
    """
    files = _list_files(file_pattern)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    # Each input pipeline reads its own shards, or its own records if shards are too few.
    shard_records = 1 < num_pipelines > len(files)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1 and not shard_records:
        dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)

    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(8, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
    if shard_records:
        dataset = dataset.shard(num_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(1000, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(
        lambda records: decode_record(records, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE)
    if dynamic_masking is not None:
        dataset = _mask_batches(dataset, dynamic_masking, seed, is_training)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _list_files(file_pattern: str) -> list[str]:
    """Comma-separated globs -> files, each glob's matches sorted."""
    files = []
    for pattern in filter(None, (p.strip() for p in file_pattern.split(","))):
        files += sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise ValueError(f"no TFRecord files match {file_pattern!r}")
    return files


def _mask_batches(dataset: tf.data.Dataset, dynamic_masking, seed: int | None,
                  is_training: bool) -> tf.data.Dataset:
    """Maps `dynamic_masking` over the batches with a seed per batch from a seeded stream
    that is part of the iterator's state, so the masks are reproducible and survive a
    checkpoint restore. Evaluation always gets the same masks."""
    mask_seed = 0 if seed is None and not is_training else seed
    seeds = tf.data.Dataset.random(seed=mask_seed).batch(2)  # [2] int64 per batch
    return tf.data.Dataset.zip(dataset, seeds).map(
        dynamic_masking, num_parallel_calls=tf.data.AUTOTUNE)
