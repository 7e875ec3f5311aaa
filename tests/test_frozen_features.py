"""Feature-based runs on cached layers (glue_suite.frozen_features): the cached path gives
the one-model path's logits, its batches follow the run's seed and bucketing, and the
cache holds the sentences' pieces of the mode's layers only. Tiny encoder (4 layers, H=16)."""

import numpy as np
import pytest

from bert_tf.checkpoints import read_checkpoint, save_checkpoint
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from glue_suite import batching, task_models
from glue_suite import frozen_features as ff
from glue_suite.tasks import TASKS

T, H, VOCAB = 16, 16, 30
SPEC = TASKS["conll2003"]
# (window length, sentence start, sentence length): a sentence at the window's start, one
# in its middle, a whole window, one cut short by a split, one without pieces.
ROWS = [(16, 1, 5), (12, 4, 6), (9, 1, 7), (14, 6, 8), (5, 1, 2), (7, 3, 0), (16, 2, 13),
        (10, 5, 4), (11, 1, 9)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt")
    (directory / "vocab.txt").write_text("\n".join(f"w{i}" for i in range(VOCAB)) + "\n")
    encoder = BertEncoder(BertConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=4,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=T))
    encoder.build()
    save_checkpoint(str(directory), {"encoder": encoder}, str(directory / "vocab.txt"), True)
    return read_checkpoint(str(directory))


def ner_rows(rows=ROWS, seed=0) -> dict:
    """NER features as glue_suite.features lays them out: windows [CLS] ... [SEP], each
    with one sentence (a run of sentence_mask) whose pieces carry labels."""
    rng = np.random.default_rng(seed)
    F = len(rows)
    features = {name: np.zeros((F, T), np.int32) for name in
                ("input_ids", "input_mask", "segment_ids", "labels", "sentence_mask")}
    features["label_weights"] = np.zeros((F, T), np.float32)
    for f, (length, start, size) in enumerate(rows):
        features["input_ids"][f, :length] = rng.integers(5, VOCAB, length)
        features["input_mask"][f, :length] = 1
        features["sentence_mask"][f, start:start + size] = 1
        features["labels"][f, start:start + size] = rng.integers(0, SPEC.num_labels, size)
        features["label_weights"][f, start:start + size] = rng.random(size) < 0.7
    return features


def one_model(checkpoint, mode, seed=0):
    """The one-model path, with non-uniform layer weights so that mixing is tested."""
    encoder = task_models.build_encoder(checkpoint, dropout=0.1)
    model = task_models.build_feature_model(SPEC, encoder, None, mode, bilstm_units=8)
    combiner = model.get_layer("tagger").get_layer("features")
    if hasattr(combiner, "layer_weights"):
        combiner.layer_weights.assign(np.random.default_rng(seed).normal(
            size=combiner.layer_weights.shape))
    return encoder, model


def cached_logits(encoder, model, features, mode, encoded=None):
    """The tagger's logits on the cache of `encoded` (default: `features`)."""
    layers = ff.read_layers(mode, encoder.config.num_hidden_layers)
    cache, _ = ff.encode(encoder, features if encoded is None else encoded, layers,
                         batch_size=4, length_multiple=4)
    return ff.predict(model.get_layer("tagger"), cache, features, batch_size=3,
                      length_multiple=4, fill=task_models.PADDING_LOGIT, verbose=0)


def one_model_logits(model, features):
    inputs = {k: features[k] for k in (*task_models.INPUT_NAMES, "sentence_mask")}
    return np.asarray(model(inputs, training=False))


# float16's unit roundoff: a stored value is off by at most this fraction of itself.
FLOAT16_ROUNDING = 2.0 ** -11


@pytest.mark.parametrize("mode", ["concat_last_four", "weighted_sum_all", "second_to_last"])
def test_cached_layers_give_the_one_models_logits(checkpoint, mode, monkeypatch):
    """Same weights, same rows: the tagger on cached layers (other batches, other
    lengths, sentences left-aligned) gives the one model's logits at every position.

    float32 storage isolates the plumbing: equal up to float32 reassociation (1e-4).
    float16 storage rounds every stored value by at most FLOAT16_ROUNDING of itself; the
    combiner, the LSTM gates and the projection are smooth and, at initialisation, do not
    amplify relative errors (measured: at most 0.9 x FLOAT16_ROUNDING of the largest
    logit over 6 modes x 3 seeds), so 3 x FLOAT16_ROUNDING of the largest logit bounds
    it. Reading the neighbouring piece instead (an off-by-one in the alignment) moves
    the logits by 30-80% of the largest (checked last): the tolerance can fail.
    """
    features = ner_rows()
    encoder, model = one_model(checkpoint, mode)
    expected = one_model_logits(model, features)
    sentence = features["sentence_mask"].astype(bool)
    assert np.all(expected[~sentence] == task_models.PADDING_LOGIT)
    scale = np.abs(expected[sentence]).max()

    monkeypatch.setattr(ff, "STORAGE_DTYPE", np.float32)
    exact = cached_logits(encoder, model, features, mode)
    np.testing.assert_allclose(exact[sentence], expected[sentence], rtol=1e-4, atol=1e-4 * scale)
    assert np.all(exact[~sentence] == task_models.PADDING_LOGIT)

    monkeypatch.setattr(ff, "STORAGE_DTYPE", np.float16)
    stored = cached_logits(encoder, model, features, mode)
    tolerance = 3 * FLOAT16_ROUNDING * scale
    np.testing.assert_allclose(stored[sentence], expected[sentence], rtol=0, atol=tolerance)
    assert np.all(stored[~sentence] == task_models.PADDING_LOGIT)
    shifted = dict(features, sentence_mask=np.roll(features["sentence_mask"], 1, axis=1))
    misaligned = cached_logits(encoder, model, features, mode, encoded=shifted)
    assert np.abs(misaligned[sentence] - expected[sentence]).max() > 10 * tolerance


def test_cache_holds_the_modes_layers_at_the_sentences_pieces_only(checkpoint):
    features = ner_rows()
    encoder = task_models.build_encoder(checkpoint)
    layers = ff.read_layers("concat_last_four", 4)
    cache, stats = ff.encode(encoder, features, layers, batch_size=4, length_multiple=4)
    tokens = int(features["sentence_mask"].sum())  # no padding, no context
    assert cache.values.shape == (tokens, 4, H) and cache.values.dtype == np.float16
    assert (stats["tokens"], stats["layers"], stats["rows"]) == (tokens, [1, 2, 3, 4], len(ROWS))
    assert stats["megabytes"] == round(tokens * 4 * H * 2 / 2 ** 20, 1)
    outputs = encoder(features, training=False)["encoder_outputs"]  # [F, T, H] each
    for f, (_, start, size) in enumerate(ROWS):
        expected = np.stack([outputs[i][f, start:start + size] for i in layers], axis=1)
        # float16 rounding (relative) on top of float32 noise of other batch shapes.
        np.testing.assert_allclose(cache.gather([f], T)[0, :size], expected,
                                   rtol=FLOAT16_ROUNDING, atol=1e-5)
        assert np.all(cache.gather([f], T)[0, size:] == 0)


def test_training_batches_follow_the_runs_seed_batch_size_and_bucketing(checkpoint):
    """The tagger's batches are batching.train_dataset's over the sentences (same rows in
    the same order for the same seed, cut to the bucketed longest sentence), with each
    row's cached layers and its labels left-aligned beside them."""
    features = ner_rows(ROWS * 4)  # 36 rows
    cache, _ = ff.encode(task_models.build_encoder(checkpoint), features,
                         ff.read_layers("last", 4), batch_size=8, length_multiple=4)
    starts, lengths = ff.sentence_spans(features["sentence_mask"])
    aligned = {k: ff.left_aligned(features[k], starts, lengths)
               for k in ("sentence_mask", "labels", "label_weights")}
    rows = batching.train_dataset(({"input_mask": aligned["sentence_mask"],
                                    "row": np.arange(36)},), 8, 3, 4)
    dataset = ff.train_dataset(cache, features, batch_size=8, seed=3, length_multiple=4)
    assert dataset.cardinality() == 5  # ceil(36 / 8)
    for epoch in range(2):  # reshuffled every epoch, as batching's
        seen = []
        for (x, y, w), (reference,) in zip(dataset, rows):
            batch = reference["row"].numpy()
            length = x["sentence_mask"].shape[1]
            assert length == batching.bucket_lengths(lengths[batch].max(), 4, T)
            np.testing.assert_array_equal(x["layers"], cache.gather(batch, length))
            np.testing.assert_array_equal(x["sentence_mask"],
                                          aligned["sentence_mask"][batch, :length])
            np.testing.assert_array_equal(y, aligned["labels"][batch, :length])
            np.testing.assert_array_equal(w, aligned["label_weights"][batch, :length])
            seen += batch.tolist()
        assert sorted(seen) == list(range(36))

    def order(seed):
        return [tuple(np.asarray(x["layers"][:, 0, 0, 0])) for x, _, _ in
                ff.train_dataset(cache, features, 8, seed, 4)]

    assert order(3) == order(3) != order(4)


def test_layer_files_serve_any_mode_and_are_rebuilt_when_unreadable(checkpoint, tmp_path,
                                                                     caplog):
    features = ner_rows()
    encoder = task_models.build_encoder(checkpoint)
    key = {"weights_sha256": "abc", "dtype": "float32"}

    def encode(layers, key=key):
        return ff.encode(encoder, features, layers, 4, 4, str(tmp_path), key)

    in_memory, _ = ff.encode(encoder, features, (1, 2, 3, 4), 4, 4)
    written, stats = encode((1, 2, 3, 4))
    assert not stats["from_disk"] and len(list(tmp_path.glob("frozen_layers/*/*.npy"))) == 5
    np.testing.assert_array_equal(written.values, in_memory.values)
    read, stats = encode((0, 4))  # another mode: from the files
    assert stats["from_disk"]
    np.testing.assert_array_equal(read.values[:, 1], in_memory.values[:, 3])
    assert not encode((0,), key={**key, "dtype": "mixed_bfloat16"})[1]["from_disk"]
    for path in tmp_path.glob("frozen_layers/*/layer_0.npy"):
        path.write_bytes(path.read_bytes()[:100])  # truncated
    with caplog.at_level("WARNING", logger="glue_suite.frozen_features"):
        again, stats = encode((0, 4))
    assert not stats["from_disk"] and "unreadable layer cache" in caplog.text
    np.testing.assert_array_equal(again.values, read.values)
