"""Task models per kind, losses, training in graph mode, decoding, degenerate runs and the
grid summary, on a tiny saved checkpoint (2 layers, H=16)."""

import math

import keras
import numpy as np
import pytest

from bert_tf import heads
from bert_tf.checkpoints import collect_weights, read_checkpoint, save_checkpoint
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.tokenization import BertTokenizer
from glue_suite import features as F
from glue_suite import finetune, scoring, task_models, tasks
from glue_suite.readers import InputExample, NerSentence
from glue_suite.tasks import TASKS
from glue_suite.timings import ProgressLog

T = 12
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(25)] + ["##s"]


def tiny_checkpoint(directory, vocab, **config):
    """A freshly initialised 2-layer H=16 encoder saved in our format, read back."""
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    encoder = BertEncoder(BertConfig(**{
        "vocab_size": len(vocab), "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 32, **config}))
    encoder.build()
    save_checkpoint(str(directory), {"encoder": encoder}, str(directory / "vocab.txt"), True)
    return read_checkpoint(str(directory))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("ckpt"), VOCAB, max_position_embeddings=32,
                           hidden_dropout_prob=0.3)


def random_inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, len(VOCAB), shape).astype("int32")
    ids[..., 0] = 2  # [CLS]
    return {"input_ids": ids, "input_mask": np.ones(shape, "int32"),
            "segment_ids": np.zeros(shape, "int32")}


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("task,shape,expected", [
    ("rte", (3, T), (3, 2)), ("stsb", (3, T), (3,)), ("swag", (3, 4, T), (3, 4)),
    ("conll2003", (3, T), (3, T, 9))])
def test_model_outputs_per_kind(checkpoint, task, shape, expected):
    encoder = task_models.build_encoder(checkpoint)
    model = task_models.build_model(TASKS[task], encoder, T)
    outputs = model(random_inputs(shape))
    assert tuple(outputs.shape) == expected and outputs.dtype == "float32"


def test_span_model_and_encoder_weights(checkpoint):
    encoder = task_models.build_encoder(checkpoint, dropout=0.1)
    # BERT's fine-tuning dropout replaces the checkpoint's (0.3 here).
    assert encoder.config.hidden_dropout_prob == encoder.config.attention_probs_dropout_prob == 0.1
    loaded = collect_weights({"encoder": encoder})
    assert loaded.keys() == checkpoint.weights.keys()
    for name, value in checkpoint.weights.items():
        np.testing.assert_array_equal(loaded[name], value)
    model = task_models.build_model(TASKS["squad1.1"], encoder, T)
    outputs = model(random_inputs((2, T)))
    assert set(outputs) == {"start_logits", "end_logits"}
    assert tuple(outputs["start_logits"].shape) == (2, T)
    assert not encoder.pooler.trainable  # span and token heads do not use it


def test_multiple_choice_scores_each_sequence_on_its_own(checkpoint):
    """Permuting the choices permutes the logits: one [CLS] score per sequence."""
    model = task_models.build_model(TASKS["swag"], task_models.build_encoder(checkpoint), T)
    inputs = random_inputs((2, 4, T))
    order = [2, 0, 3, 1]
    logits = model(inputs).numpy()
    permuted = model({k: v[:, order] for k, v in inputs.items()}).numpy()
    np.testing.assert_allclose(permuted, logits[:, order], rtol=1e-5, atol=1e-6)


def test_mixed_bfloat16_model(checkpoint):
    encoder = task_models.build_encoder(checkpoint, dtype="mixed_bfloat16")
    model = task_models.build_model(TASKS["rte"], encoder, T, dtype="mixed_bfloat16")
    outputs = model(random_inputs((2, T)))
    assert outputs.dtype == "float32"  # logits in float32 for the loss
    assert encoder(random_inputs((2, T)))["sequence_output"].dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in model.weights)


def _compiled(checkpoint, task):
    model = task_models.build_model(TASKS[task], task_models.build_encoder(checkpoint, 0.0), T, 0.0)
    task_models.compile_model(model, TASKS[task].kind, keras.optimizers.SGD(0.0))
    return model


def test_span_loss_is_the_mean_of_start_and_end_cross_entropy(checkpoint):
    model = _compiled(checkpoint, "squad1.1")
    x = random_inputs((3, T))
    y = {"start_logits": np.array([1, 4, 0]), "end_logits": np.array([2, 6, 0])}
    predicted = model(x)
    loss = float(model.compute_loss(x, y, predicted, training=False))

    def xent(logits, labels):
        logits = logits.numpy().astype(np.float64)
        log_z = np.log(np.exp(logits).sum(-1))
        return np.mean(log_z - logits[np.arange(len(labels)), labels])
    expected = 0.5 * (xent(predicted["start_logits"], y["start_logits"]) +
                      xent(predicted["end_logits"], y["end_logits"]))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_token_loss_ignores_positions_with_zero_label_weight(checkpoint):
    model = _compiled(checkpoint, "conll2003")
    x = random_inputs((2, T))
    labels = np.random.default_rng(0).integers(0, 9, (2, T))
    weights = np.zeros((2, T), np.float32)
    weights[:, 1:4] = 1.0  # first pieces of three words
    predicted = model(x)
    loss = float(model.compute_loss(x, labels, predicted, weights, training=False))
    other = labels.copy()
    other[weights == 0] = (other[weights == 0] + 1) % 9  # change unscored labels only
    assert float(model.compute_loss(x, other, predicted, weights, training=False)) == \
        pytest.approx(loss)
    changed = labels.copy()
    changed[0, 2] = (changed[0, 2] + 1) % 9
    assert float(model.compute_loss(x, changed, predicted, weights, training=False)) != \
        pytest.approx(loss)


# ---------------------------------------------------------------------------------------
# Training (graph mode, as real runs) and prediction
# ---------------------------------------------------------------------------------------

def test_fine_tune_learns_a_toy_task(checkpoint, monkeypatch, caplog):
    """Label = which word fills the sequence; the real training path (tf.data, AdamW with
    warmup and decay, Model.fit in a tf.function) learns it. (A random tiny encoder needs
    a strong signal and no dropout to learn in 40 steps.) With verbose=2, as reproduce runs
    it, the progress log reports steps and the loss Keras passes it."""
    features = random_inputs((64, T), seed=1)
    labels = np.arange(64) % 2
    features["input_ids"][:, 1:] = np.where(labels == 1, 5, 6)[:, None]
    features["labels"] = labels.astype(np.int32)
    settings = finetune.TrainSettings(learning_rate=1e-2, epochs=10, batch_size=16, seed=0,
                                      dropout=0.0, verbose=2)
    every_step = lambda total_steps: ProgressLog(total_steps, interval_s=0.0)
    monkeypatch.setattr(finetune.timings, "ProgressLog", every_step)
    with caplog.at_level("INFO", logger="glue_suite.timings"):
        model, history = finetune.fine_tune(TASKS["rte"], checkpoint, features, settings, T)
    assert history["steps"] == 40 and history["warmup_steps"] == 4
    progress = [r.getMessage() for r in caplog.records if r.name == "glue_suite.timings"]
    assert len(progress) == 39 and progress[0].startswith("step 1/40 (2%), loss ")
    assert history["loss"][-1] < 0.3 < 0.6 < history["loss"][0]
    assert model.optimizer.iterations.numpy() == 40
    assert model.jit_compile is False  # TrainSettings' default, not Keras's "auto"
    logits = finetune.predict(model, features, batch_size=32, kind=tasks.CLASSIFICATION,
                              length_multiple=settings.length_multiple, verbose=0)
    examples = [InputExample(str(i), "", "", TASKS["rte"].labels[label])
                for i, label in enumerate(labels)]
    evaluation = scoring.evaluate(TASKS["rte"], examples, features, logits, True)
    assert evaluation.metrics["accuracy"] == 100.0 and not evaluation.degenerate


def test_train_steps():
    settings = finetune.TrainSettings(learning_rate=2e-5, epochs=3, batch_size=32)
    assert finetune.train_steps(2490, settings) == (234, 23)  # RTE: 78 steps x 3, 10% warmup


# ---------------------------------------------------------------------------------------
# Table 5's "+ BiLSTM" head and Table 7's feature-based NER
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("task,shape,expected", [
    ("rte", (3, T), (3, 2)), ("stsb", (3, T), (3,)), ("swag", (3, 4, T), (3, 4)),
    ("conll2003", (3, T), (3, T, 9))])
def test_bilstm_head_outputs_per_kind(checkpoint, task, shape, expected):
    encoder = task_models.build_encoder(checkpoint)
    model = task_models.build_model(TASKS[task], encoder, T, head="bilstm", bilstm_units=8)
    outputs = model(random_inputs(shape))
    assert tuple(outputs.shape) == expected and outputs.dtype == "float32"
    head = model.get_layer("head")
    assert isinstance(head, heads.BiLSTMHead) and head.units == 8 and head.num_layers == 2
    assert head.per_token == (task == "conll2003")  # sentence tasks read the [CLS] state
    assert not encoder.pooler.trainable and encoder.embeddings.trainable  # still fine-tuned


def test_bilstm_span_head(checkpoint):
    model = task_models.build_model(TASKS["squad1.1"], task_models.build_encoder(checkpoint), T,
                                    head="bilstm", bilstm_units=8)
    outputs = model(random_inputs((2, T)))
    assert {k: tuple(v.shape) for k, v in outputs.items()} == {
        "start_logits": (2, T), "end_logits": (2, T)}
    assert model.get_layer("head").num_outputs == 2
    with pytest.raises(ValueError, match="unknown head"):
        task_models.build_model(TASKS["rte"], task_models.build_encoder(checkpoint), T, head="crf")


@pytest.fixture(scope="module")
def deep_checkpoint(tmp_path_factory):
    """4 layers: enough for the "last four" modes."""
    directory = tmp_path_factory.mktemp("deep_ckpt")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=4,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    encoder = BertEncoder(config)
    encoder.build()
    save_checkpoint(str(directory), {"encoder": encoder}, str(directory / "vocab.txt"), True)
    return read_checkpoint(str(directory))


def test_feature_model_per_mode(deep_checkpoint, checkpoint, caplog):
    """Every Table 7 mode: features of width H (4H concatenated) from the frozen encoder
    in inference mode, even when the model trains; per-token logits, PADDING_LOGIT
    outside the sentence."""
    checkpoint, shallow = deep_checkpoint, checkpoint
    x = random_inputs((2, T))
    x["sentence_mask"] = np.zeros((2, T), np.int32)
    x["sentence_mask"][:, 3:9] = 1
    reference = task_models.build_encoder(checkpoint)(x, training=False)["encoder_outputs"]
    hidden = checkpoint.config.hidden_size
    for mode in heads.FEATURE_MODES:
        encoder = task_models.build_encoder(checkpoint, dropout=0.1)
        model = task_models.build_feature_model(TASKS["conll2003"], encoder, T, mode,
                                                bilstm_units=8)
        logits = np.asarray(model(x, training=True))
        assert logits.shape == (2, T, 9)
        assert np.all(logits[:, :3] == task_models.PADDING_LOGIT)
        assert np.all(logits[:, 3:9] != task_models.PADDING_LOGIT)
        combiner = model.get_layer("tagger").get_layer("features")
        layers = keras.Model(model.inputs, model.get_layer("frozen_layers").output)
        width = 4 * hidden if mode == "concat_last_four" else hidden
        stacked = layers(x, training=True)                              # [B, T, K, H]
        assert tuple(combiner(stacked).shape) == (2, T, width), mode
        expected = {"embeddings": reference[0], "second_to_last": reference[-2],
                    "last": reference[-1]}.get(mode)
        if expected is not None:  # no dropout although training=True: inference mode
            np.testing.assert_allclose(stacked[:, :, 0], expected, atol=1e-6)
        assert not encoder.trainable and all(
            "encoder" not in w.path for w in model.trainable_weights), mode
    with pytest.raises(ValueError, match="token task"):
        task_models.build_feature_model(TASKS["rte"], task_models.build_encoder(checkpoint), T,
                                        "last")
    # A 2-layer model (smoke runs) has fewer than four layers to concatenate: all 3 outputs.
    with caplog.at_level("WARNING", logger="glue_suite.frozen_features"):
        model = task_models.build_feature_model(
            TASKS["conll2003"], task_models.build_encoder(shallow), T, "concat_last_four",
            bilstm_units=8)
    assert model.get_layer("tagger").input["layers"].shape[-2:] == (3, hidden)
    assert "2-layer encoder: uses all its 3 outputs" in caplog.text


def test_feature_based_training_trains_the_tagger_alone(checkpoint):
    """fit (graph mode, AdamW with weight decay) trains the tagger (the BiLSTM and the
    layer weights) on the cached layers; the encoder is not part of what trains."""
    features = random_inputs((16, T), seed=2)
    rng = np.random.default_rng(0)
    features["labels"] = rng.integers(0, 9, (16, T)).astype(np.int32)
    features["label_weights"] = np.ones((16, T), np.float32)
    features["sentence_mask"] = np.ones((16, T), np.int32)
    settings = finetune.TrainSettings(learning_rate=1e-2, epochs=2, batch_size=8, seed=0,
                                      verbose=0, feature_mode="weighted_sum_all",
                                      bilstm_units=8)
    model, history = finetune.fine_tune(TASKS["conll2003"], checkpoint, features, settings, T)
    assert history["steps"] == 4 and np.all(np.isfinite(history["loss"]))
    assert model.name == "tagger" and all("encoder" not in w.path for w in model.weights)
    layer_weights = model.get_layer("features").layer_weights.numpy()
    assert layer_weights.shape == (3,) and np.any(layer_weights != 0)  # L + 1 = 3, learned


# ---------------------------------------------------------------------------------------
# Decoding, degenerate runs, the grid
# ---------------------------------------------------------------------------------------

def test_constant_predictions_are_flagged_degenerate():
    """MRPC dev has 279 paraphrases of 408: always "1" scores accuracy 68.4, F1 81.2."""
    labels = ["1"] * 279 + ["0"] * 129
    examples = [InputExample(str(i), "a", "b", label) for i, label in enumerate(labels)]
    constant = np.tile([[-1.0, 1.0]], (408, 1))
    evaluation = scoring.evaluate(TASKS["mrpc"], examples, {}, constant, True)
    assert evaluation.degenerate
    assert evaluation.metrics["accuracy"] == pytest.approx(68.38, abs=0.01)
    assert evaluation.metrics["f1"] == pytest.approx(81.22, abs=0.01)
    varied = constant.copy()
    varied[0] = [1.0, -1.0]
    assert not scoring.evaluate(TASKS["mrpc"], examples, {}, varied, True).degenerate
    scores = scoring.evaluate(TASKS["stsb"], [InputExample(str(i), "a", "b", float(i))
                                              for i in range(5)], {}, np.full(5, 2.5), True)
    assert scores.degenerate and math.isnan(scores.metrics["pearson"])


def test_ner_tags_from_first_piece_logits(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizer(str(tmp_path / "vocab.txt"), True)
    spec = TASKS["conll2003"]
    sentences = [NerSentence(0, ("w1", "w2s", "w3"), ("B-PER", "I-PER", "O")),
                 NerSentence(0, ("w4", "w5"), ("B-LOC", "O"))]
    features = F.ner_features("conll2003", sentences, tokenizer, F.FeatureSettings(8))
    logits = np.zeros(features["labels"].shape + (9,), np.float32)
    logits[..., 0] = 1.0  # "O" everywhere, incl. context and continuation pieces
    rows, cols = np.nonzero(features["label_weights"])
    logits[rows, cols, features["labels"][rows, cols]] = 5.0
    evaluation = scoring.evaluate(spec, sentences, features, logits, True)
    assert evaluation.predictions == [list(s.tags) for s in sentences]
    assert evaluation.metrics["ner_f1"] == 100.0


def test_grid_summary():
    def run(lr, seed, accuracy, degenerate=False):
        return {"learning_rate": lr, "seed": seed, "degenerate": degenerate,
                "metrics": {"accuracy": accuracy, "f1": accuracy / 2}}
    runs = [run(5e-5, 0, 60.0), run(5e-5, 1, 70.0), run(5e-5, 2, 65.0),
            run(2e-5, 0, 68.4, degenerate=True), run(2e-5, 1, float("nan")),
            run(3e-5, 0, 70.0)]
    summary = scoring.summarize_grid(runs, "accuracy")
    assert summary["best"] == 1  # the first of two equal best runs
    assert (summary["best_learning_rate"], summary["best_seed"], summary["best_value"]) == (
        5e-5, 1, 70.0)
    first, second, third = summary["by_learning_rate"]
    assert first["learning_rate"] == 5e-5 and first["runs"] == 3
    assert first["mean"]["accuracy"] == pytest.approx(65.0)
    assert first["std"]["accuracy"] == pytest.approx(np.std([60, 70, 65], ddof=1))
    assert first["mean"]["f1"] == pytest.approx(32.5)
    # NaN (e.g. Pearson of constant predictions) is left out of the mean and ranks last.
    assert second["mean"]["accuracy"] == pytest.approx(68.4) and second["std"]["accuracy"] == 0
    assert second["degenerate_runs"] == 1 and third["runs"] == 1 and third["std"]["f1"] == 0
    assert summary["degenerate_runs"] == [3]
    nan_only = scoring.summarize_grid([run(1e-5, 0, float("nan")), run(1e-5, 1, 1.0)],
                                      "accuracy")
    assert nan_only["best"] == 1
    with pytest.raises(ValueError):
        scoring.summarize_grid([], "accuracy")
