"""Tests of bert_tf.pretraining_dataset on records written field by field (records
written by create_pretraining_data are read back in test_create_pretraining_data.py)."""

import collections

import pytest
import tensorflow as tf

from bert_tf.cli import InputError
from bert_tf.pretraining_dataset import check_records, make_pretraining_dataset

CLS, SEP, MASK = 2, 3, 4
T, P = 64, 10


def test_records_written_like_the_original_decode(tmp_path, caplog):
    """A record built field by field as the original writer does it."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    ids = [CLS, 10, MASK, SEP, 12, SEP] + [0] * (T - 6)
    feature = collections.OrderedDict()
    feature["input_ids"] = ints(ids)
    feature["input_mask"] = ints([1] * 6 + [0] * (T - 6))
    feature["segment_ids"] = ints([0, 0, 0, 0, 1, 1] + [0] * (T - 6))
    feature["masked_lm_positions"] = ints([2] + [0] * (P - 1))
    feature["masked_lm_ids"] = ints([11] + [0] * (P - 1))
    feature["masked_lm_weights"] = tf.train.Feature(
        float_list=tf.train.FloatList(value=[1.0] + [0.0] * (P - 1)))
    feature["next_sentence_labels"] = ints([1])
    record = tf.train.Example(features=tf.train.Features(feature=feature))
    path = str(tmp_path / "original.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        w.write(record.SerializeToString())
    dataset = make_pretraining_dataset(path, 1, T, P, is_training=True)
    # No autotuning: deleting an iterator it watched can stall (distribute.without_autotune).
    assert dataset.options().autotune.enabled is False
    batch = next(iter(dataset))
    assert batch["input_ids"].numpy().tolist() == [ids]
    assert batch["masked_lm_ids"].numpy()[0, 0] == 11
    assert batch["next_sentence_labels"].numpy().tolist() == [[1]]

    # Without metadata.json and not named like ours: read, with a warning; the shapes
    # are checked on the first record (the vocabulary cannot be).
    assert check_records(path, "--train_files", T, P, vocab_file=None) == [path]
    assert "no metadata.json beside these records" in caplog.text
    with pytest.raises(InputError, match=f"{path}: records hold max_seq_length {T}, "
                                         f"max_predictions_per_seq {P}; pretrain was given "
                                         f"max_predictions_per_seq 20 for --train_files"):
        check_records(path, "--train_files", T, 20, vocab_file=None)
