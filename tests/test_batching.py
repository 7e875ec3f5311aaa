"""Length-bucketed batches: every row once per epoch, few shapes, trimmed batches give the
padded batch's outputs and loss, prediction order restored, the TPU path static; on a
tiny saved checkpoint (2 layers, H=16)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import heads
from glue_suite import batching, finetune, task_models, timings
from glue_suite.run import build_parser
from glue_suite.run_config import resolve_config
from glue_suite.tasks import TASKS
from tests.test_finetune import tiny_checkpoint

T = 40
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(25)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("ckpt"), VOCAB, max_position_embeddings=64)


def padded_rows(num_rows, shape=(T,), seed=0, min_length=3):
    """Rows of random lengths padded to T; row i's id i sits in labels."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_length, T + 1, (num_rows, *shape[:-1]))
    mask = (np.arange(T) < lengths[..., None]).astype("int32")
    ids = rng.integers(5, len(VOCAB), (num_rows, *shape)).astype("int32") * mask
    segments = ((np.arange(T) >= lengths[..., None] // 2) * mask).astype("int32")
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "labels": np.arange(num_rows, dtype=np.int32)}


def epoch_batches(dataset):
    return [(x, y.numpy()) for x, y in dataset]


# ---------------------------------------------------------------------------------------
# Training batches
# ---------------------------------------------------------------------------------------

def test_every_row_once_per_epoch_in_ceil_n_over_b_batches():
    batch_size = 4
    num_rows = batch_size * batching.CHUNK_BATCHES * 2 + 13  # three chunks, one partial batch
    features = padded_rows(num_rows)
    dataset = batching.train_dataset(finetune.training_tuple(features, "classification"),
                                     batch_size, seed=3, length_multiple=8)
    orders = []
    for _ in range(2):
        batches = epoch_batches(dataset)
        assert len(batches) == -(-num_rows // batch_size) == dataset.cardinality()
        assert sorted(len(y) for _, y in batches)[0] == 13 % batch_size
        assert sum(len(y) < batch_size for _, y in batches) == 1
        rows = np.concatenate([y for _, y in batches])
        np.testing.assert_array_equal(np.sort(rows), np.arange(num_rows))
        for x, y in batches:  # each row arrives whole: its real tokens and its label
            length = x["input_ids"].shape[1]
            np.testing.assert_array_equal(x["input_ids"], features["input_ids"][y, :length])
            assert features["input_mask"][y, length:].sum() == 0
        orders.append(rows)
    assert not np.array_equal(orders[0], orders[1])  # shuffled again every epoch


def test_batches_group_similar_lengths_and_shapes_are_bounded():
    batch_size, multiple = 8, 8
    features = padded_rows(batch_size * batching.CHUNK_BATCHES)
    dataset = batching.train_dataset(finetune.training_tuple(features, "classification"),
                                     batch_size, seed=0, length_multiple=multiple)
    shapes, padded_tokens = set(), 0
    for x, y in epoch_batches(dataset):
        length = x["input_ids"].shape[1]
        longest = features["input_mask"][y].sum(-1).max()
        assert length == min(T, -(-longest // multiple) * multiple)  # rounded up, capped
        shapes.add(tuple(x["input_ids"].shape))
        padded_tokens += int(np.prod(x["input_ids"].shape))
    assert len(shapes) <= 2 * -(-T // multiple)
    # Sorted chunks: far fewer positions than [B, T] batches.
    assert padded_tokens < 0.7 * features["input_ids"].size


@pytest.mark.parametrize("task", ["rte", "squad1.1"])
def test_fit_takes_one_step_per_batch_and_traces_once(checkpoint, monkeypatch, task):
    """Keras needs the batch count (tf.data loses it in unbatch()): no extra empty step
    per epoch, which would also shift the learning-rate schedule. The train step is traced
    once: variables created inside it (the optimizer's, SQuAD's two loss trackers) would
    make tf.function trace it again."""
    features = padded_rows(70)
    features["labels"] %= 2
    if task == "squad1.1":
        features["start_positions"] = features["end_positions"] = features.pop("labels")
    traces = []
    train_step = keras.Model.train_step
    monkeypatch.setattr(keras.Model, "train_step",  # Python runs it only while tracing
                        lambda model, data: traces.append(1) or train_step(model, data))
    settings = finetune.TrainSettings(learning_rate=1e-3, epochs=3, batch_size=16, verbose=0)
    model, history = finetune.fine_tune(TASKS[task], checkpoint, features, settings, T,
                                        tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert model.optimizer.iterations.numpy() == history["steps"] == 15
    assert history["first_step_seconds"] >= history["step_seconds_median"] > 0
    assert len(traces) == 1


@pytest.mark.parametrize("length_multiple", [8, 0])
def test_one_iterator_per_fit_gives_each_epoch_the_batches_a_new_iterator_gives(
        length_multiple):
    features = padded_rows(100)
    data = finetune.training_tuple(features, "classification")
    dataset = batching.train_dataset(data, 8, 5, length_multiple)
    by_epoch = epoch_batches(dataset) + epoch_batches(dataset)  # what fit read before
    repeated, steps_per_epoch = finetune.one_iterator_per_fit(
        batching.train_dataset(data, 8, 5, length_multiple))
    assert steps_per_epoch == 13  # ceil(100 / 8)
    one_iterator = epoch_batches(repeated.take(2 * steps_per_epoch))
    assert len(one_iterator) == len(by_epoch) == 26
    for (x, y), (x_again, y_again) in zip(by_epoch, one_iterator):
        np.testing.assert_array_equal(y, y_again)
        np.testing.assert_array_equal(x["input_ids"], x_again["input_ids"])
    assert not np.array_equal(np.concatenate([y for _, y in by_epoch[:13]]),
                              np.concatenate([y for _, y in by_epoch[13:]]))


def test_seeded_and_reproducible():
    features = padded_rows(100)
    data = finetune.training_tuple(features, "classification")
    first = [y for _, y in epoch_batches(batching.train_dataset(data, 8, 5, 8))]
    again = [y for _, y in epoch_batches(batching.train_dataset(data, 8, 5, 8))]
    other = [y for _, y in epoch_batches(batching.train_dataset(data, 8, 6, 8))]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_token_and_swag_arrays_are_trimmed_together():
    features = padded_rows(50)
    features["labels"] = np.ones((50, T), np.int32)
    features["label_weights"] = features["input_mask"].astype(np.float32)
    for x, y, w in batching.train_dataset(finetune.training_tuple(features, "token"), 8, 0, 8):
        assert x["input_ids"].shape == y.shape == w.shape
    swag = padded_rows(30, shape=(4, T))  # [N, C, T]: the longest choice sets the length
    for x, y in batching.train_dataset(finetune.training_tuple(swag, "multiple_choice"), 8, 0, 8):
        longest = swag["input_mask"][y.numpy()].sum(-1).max()
        assert x["input_ids"].shape[1:] == (4, min(T, -(-longest // 8) * 8))


def test_tpu_path_keeps_static_shapes_and_drops_the_remainder():
    features = padded_rows(50)
    data = finetune.training_tuple(features, "classification")
    dataset = batching.train_dataset(data, 8, 0, length_multiple=0, drop_remainder=True)
    assert dataset.element_spec[0]["input_ids"].shape.as_list() == [8, T]
    assert [tuple(x["input_ids"].shape) for x, _ in dataset] == [(8, T)] * 6
    with pytest.raises(ValueError, match="static shapes"):
        batching.train_dataset(data, 8, 0, length_multiple=8, drop_remainder=True)
    args = build_parser().parse_args(["--task", "rte", "--strategy", "tpu", "--tpu", "local"])
    assert resolve_config(args).train.length_multiple == 0
    resolved = lambda *flags: resolve_config(build_parser().parse_args(
        ["--task", "rte", *flags])).train.length_multiple
    # Without XLA each batch is cut to its longest row; XLA compiles each length anew.
    assert resolved() == finetune.TrainSettings.length_multiple == 1
    assert resolved("--jit_compile") == batching.XLA_LENGTH_MULTIPLE > 1
    assert resolved("--jit_compile", "--length_multiple", "32") == 32
    assert resolved("--length_multiple", "0") == 0


@pytest.mark.parametrize("length_multiple", [8, 0])
def test_training_pipelines_run_without_autotuning(length_multiple):
    """Deleting an autotuned iterator can block for up to a minute
    (`distribute.without_autotune`), and fit deletes one every epoch: the training
    pipelines turn autotuning off, and so do pipelines made from them (the tagger's maps
    batching's batches)."""
    data = finetune.training_tuple(padded_rows(20), "classification")
    dataset = batching.train_dataset(data, 8, 0, length_multiple)
    assert dataset.options().autotune.enabled is False
    assert dataset.map(lambda x, y: (x, y)).options().autotune.enabled is False
    assert tf.data.Dataset.range(3).options().autotune.enabled is not False  # TF's default


# ---------------------------------------------------------------------------------------
# Same outputs for trimmed batches
# ---------------------------------------------------------------------------------------

def _model(checkpoint, task, head="dense"):
    encoder = task_models.build_encoder(checkpoint, dropout=0.0)
    return task_models.build_model(TASKS[task], encoder, None, dropout=0.0, head=head,
                                   bilstm_units=8)


@pytest.mark.parametrize("task,head,shape", [
    ("rte", "dense", (T,)), ("stsb", "dense", (T,)), ("swag", "dense", (4, T)),
    ("squad1.1", "dense", (T,)), ("conll2003", "dense", (T,)), ("rte", "bilstm", (T,)),
    ("conll2003", "bilstm", (T,))])
def test_trimmed_batch_gives_the_padded_batchs_outputs(checkpoint, task, head, shape):
    features = padded_rows(6, shape, min_length=2)
    features["input_mask"][..., 0, :] = 0  # one row as short as possible
    features["input_mask"][..., 0, :2] = 1
    inputs = task_models.model_inputs(features)
    length = int(batching.row_lengths(features["input_mask"]).max())
    model = _model(checkpoint, task, head)
    padded = model(inputs)
    trimmed = model({k: v[..., :length] for k, v in inputs.items()})
    mask = features["input_mask"][..., :length].astype(bool)
    for full, cut in zip(keras.tree.flatten(padded), keras.tree.flatten(trimmed)):
        full, cut = np.asarray(full), np.asarray(cut)
        if TASKS[task].kind in ("span", "token"):
            full, cut = full[:, :length][mask], cut[mask]  # real positions
        np.testing.assert_allclose(cut, full, rtol=1e-4, atol=1e-4)


def test_feature_model_gives_the_same_outputs_trimmed(checkpoint):
    encoder = task_models.build_encoder(checkpoint, dropout=0.0)
    model = task_models.build_feature_model(TASKS["conll2003"], encoder, None,
                                            heads.FEATURE_MODES[0], bilstm_units=8, dropout=0.0)
    features = padded_rows(4)
    # The sentence: every real token but [CLS].
    inputs = {**task_models.model_inputs(features), "sentence_mask": features["input_mask"].copy()}
    inputs["sentence_mask"][:, 0] = 0
    length = int(batching.row_lengths(features["input_mask"]).max())
    mask = features["input_mask"][:, :length].astype(bool)
    full = np.asarray(model(inputs))[:, :length][mask]
    cut = np.asarray(model({k: v[:, :length] for k, v in inputs.items()}))[mask]
    np.testing.assert_allclose(cut, full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("task", ["squad1.1", "conll2003"])
def test_per_position_loss_does_not_depend_on_padding(checkpoint, task):
    """Span logits mask padding; NER averages over scored pieces, not positions."""
    spec = TASKS[task]
    model = _model(checkpoint, task)
    task_models.compile_model(model, spec.kind, keras.optimizers.SGD(0.0))
    features = padded_rows(4)
    lengths = batching.row_lengths(features["input_mask"])
    length = int(lengths.max())
    if spec.kind == "span":
        features["start_positions"] = (lengths // 2).astype(np.int32)
        features["end_positions"] = (lengths - 2).astype(np.int32)
    else:
        features["labels"] = features["input_ids"] % spec.num_labels
        features["label_weights"] = features["input_mask"].astype(np.float32)
    full = finetune.training_tuple(features, spec.kind)
    cut = keras.tree.map_structure(lambda a: a[:, :length] if a.ndim == 2 else a, full)
    losses = []
    for x, y, *w in (full, cut):
        losses.append(float(model.compute_loss(x, y, model(x), *w, training=False)))
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)


# ---------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------

def test_sorted_batches_cover_every_row_once_with_bounded_shapes():
    mask = padded_rows(57)["input_mask"]
    batches = batching.sorted_batches(mask, 8, 8)
    rows = np.concatenate([b for _, b in batches])
    np.testing.assert_array_equal(np.sort(rows), np.arange(57))
    assert [len(b) for _, b in batches] == [8] * 7 + [1]
    assert [n for n, _ in batches] == sorted(n for n, _ in batches)  # shortest first
    assert len({(n, len(b)) for n, b in batches}) <= 2 * -(-T // 8)
    for length, batch in batches:
        longest = batching.row_lengths(mask[batch]).max()
        assert length == min(T, -(-longest // 8) * 8)
    padded = batching.sorted_batches(mask, 8, 0)
    assert [n for n, _ in padded] == [T] * 8
    np.testing.assert_array_equal(np.concatenate([b for _, b in padded]), np.arange(57))


@pytest.mark.parametrize("task", ["rte", "stsb", "swag", "squad1.1", "conll2003"])
def test_prediction_order_is_restored(checkpoint, task):
    spec = TASKS[task]
    features = padded_rows(37, (4, T) if task == "swag" else (T,), seed=2)
    model = _model(checkpoint, task)
    trimmed = finetune.predict(model, features, 8, spec.kind, length_multiple=8, verbose=0)
    padded = finetune.predict(model, features, 8, spec.kind, length_multiple=0, verbose=0)
    # Row by row, in feature order, without batching at all.
    one_by_one = [model({k: features[k][i:i + 1] for k in task_models.INPUT_NAMES})
                  for i in range(37)]
    expected = keras.tree.map_structure(
        lambda *rows: np.concatenate([np.asarray(r) for r in rows]), *one_by_one)
    for got_trimmed, got_padded, want in zip(keras.tree.flatten(trimmed),
                                             keras.tree.flatten(padded),
                                             keras.tree.flatten(expected)):
        assert got_trimmed.shape == got_padded.shape == want.shape
        if spec.kind in ("span", "token"):  # padding positions hold PADDING_LOGIT
            mask = features["input_mask"].astype(bool)
            assert (got_trimmed[~mask] == task_models.PADDING_LOGIT).all()
            got_trimmed, got_padded, want = got_trimmed[mask], got_padded[mask], want[mask]
        np.testing.assert_allclose(got_trimmed, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got_padded, want, rtol=1e-4, atol=1e-4)


def test_prediction_logs_its_progress_with_verbose_2(checkpoint, monkeypatch, caplog):
    features = padded_rows(37, (T,), seed=2)
    line = timings.ProgressLine
    monkeypatch.setattr(timings, "ProgressLine",
                        lambda what, total: line(what, total, interval_s=0.0))
    with caplog.at_level("INFO", logger="glue_suite.timings"):
        finetune.predict(_model(checkpoint, "rte"), features, 8, TASKS["rte"].kind,
                         length_multiple=8, verbose=2)
    lines = [r.getMessage().split(" (")[0] for r in caplog.records]
    assert lines == [f"predicted rows {n}/37" for n in (8, 16, 24, 32)]  # not the last
