"""BertPretrainer: the objectives' losses against Hugging Face's BERT, and causality."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map
from bert_tf.config import BertConfig
from bert_tf.pretraining_model import (BertPretrainer, PredictionSlots,
                                       cross_entropy_and_prediction,
                                       hidden_targets, mean_metrics, prediction_targets,
                                       pretraining_loss, sample_next_token_positions)

CONFIG = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, max_position_embeddings=32)
B, T, P = 3, 12, 4


def features(seed=0):
    """A padded batch with masked-LM targets and NSP labels (int32, as decode_record gives)."""
    rng = np.random.default_rng(seed)
    lengths = np.array([T, 9, 6])
    mask = (np.arange(T)[None] < lengths[:, None]).astype("int32")  # [B, T]
    ids = rng.integers(5, CONFIG.vocab_size, (B, T)).astype("int32") * mask
    segments = ((np.arange(T)[None] >= lengths[:, None] // 2) * mask).astype("int32")
    positions = np.stack([np.sort(rng.choice(np.arange(1, n - 1), P, replace=False))
                          for n in lengths]).astype("int32")  # [B, P]
    weights = np.ones((B, P), "float32")
    weights[2, 3] = 0.0  # a padded prediction slot
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(5, CONFIG.vocab_size, (B, P)).astype("int32"),
            "masked_lm_weights": weights,
            "next_sentence_labels": np.array([[0], [1], [1]], "int32")}


def build(objective, seed=1):
    keras.utils.set_random_seed(seed)
    model = BertPretrainer(BertPretrainer.config_for(CONFIG, objective), objective)
    model.build()
    return model


def to_huggingface(model, hf_class):
    """The same weights in a Hugging Face model, through the project's name map."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.BertConfig(
        vocab_size=CONFIG.vocab_size, hidden_size=CONFIG.hidden_size,
        num_hidden_layers=CONFIG.num_hidden_layers,
        num_attention_heads=CONFIG.num_attention_heads,
        intermediate_size=CONFIG.intermediate_size, hidden_act="gelu",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=CONFIG.max_position_embeddings, layer_norm_eps=1e-12,
        is_decoder=hf_class == "BertLMHeadModel")
    hf = getattr(transformers, hf_class)(hf_config).eval()
    root = model.heads()
    state = {}
    for row in name_map(CONFIG.num_hidden_layers, heads=True):
        if hf_class == "BertLMHeadModel" and row.hf.startswith(("pooler", "cls.seq")):
            continue  # the causal LM has neither pooler nor NSP head
        obj = root[row.ours.split(".")[0]]
        for part in row.ours.split(".")[1:]:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        value = np.asarray(obj.numpy())
        key = row.hf if row.hf.startswith("cls.") else "bert." + row.hf
        state[key] = torch.tensor(value.T if row.hf_transposed else value)
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected
    assert all("position_ids" in k or k == "cls.predictions.decoder.weight" for k in missing), \
        missing
    return hf, torch


def test_nsp_loss_matches_huggingface_bert_for_pretraining():
    model = build("nsp")
    batch = features()
    sums = model.loss_sums(batch)
    ours = float(pretraining_loss(sums, sums["mlm_count"], sums["nsp_count"]))

    hf, torch = to_huggingface(model, "BertForPreTraining")
    labels = np.full((B, T), -100)
    for b in range(B):
        for p in range(P):
            if batch["masked_lm_weights"][b, p]:
                labels[b, batch["masked_lm_positions"][b, p]] = batch["masked_lm_ids"][b, p]
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(batch["input_mask"]),
                 token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                 labels=torch.tensor(labels),
                 next_sentence_label=torch.tensor(batch["next_sentence_labels"][:, 0],
                                                  dtype=torch.long))
    np.testing.assert_allclose(ours, out.loss.item(), rtol=1e-5)
    assert float(sums["mlm_count"]) == 11 and float(sums["nsp_count"]) == B
    nsp_loss = torch.nn.functional.cross_entropy(
        out.seq_relationship_logits, torch.tensor(batch["next_sentence_labels"][:, 0]).long())
    np.testing.assert_allclose(float(sums["nsp_loss"]) / B, nsp_loss.item(), rtol=1e-5)


def test_ltr_loss_matches_huggingface_causal_lm():
    model = build("ltr")
    batch = features()
    sums = model.loss_sums(batch)
    ours = float(pretraining_loss(sums, sums["mlm_count"], sums["nsp_count"]))
    hf, torch = to_huggingface(model, "BertLMHeadModel")
    labels = np.where(batch["input_mask"] == 1, batch["input_ids"], -100)
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(batch["input_mask"]),
                 token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                 labels=torch.tensor(labels, dtype=torch.long))
    np.testing.assert_allclose(ours, out.loss.item(), rtol=1e-5)
    # Predictions at every position whose next token is real: (12 - 1) + (9 - 1) + (6 - 1).
    assert float(sums["mlm_count"]) == 24
    assert float(sums["nsp_loss"]) == 0 and float(sums["nsp_count"]) == 0


def test_ltr_prediction_at_t_depends_only_on_tokens_up_to_t():
    model = build("ltr")
    batch = features()
    k = 5
    changed = dict(batch, input_ids=batch["input_ids"].copy())
    changed["input_ids"][:, k] = (changed["input_ids"][:, k] + 7) % CONFIG.vocab_size
    logits = model(batch)["mlm_logits"].numpy()  # [B, T - 1, V]: position t predicts t + 1
    logits_changed = model(changed)["mlm_logits"].numpy()
    np.testing.assert_allclose(logits[:, :k], logits_changed[:, :k], atol=1e-6)
    assert np.abs(logits[0, k:] - logits_changed[0, k:]).min(axis=-1).max() > 1e-4
    # The bidirectional model, in contrast, sees the change everywhere.
    mlm = build("no_nsp")
    bidirectional = mlm.encoder(batch)["sequence_output"].numpy()
    bidirectional_changed = mlm.encoder(changed)["sequence_output"].numpy()
    assert np.abs(bidirectional[0, :k] - bidirectional_changed[0, :k]).max() > 1e-4


def test_ltr_targets_are_the_next_tokens():
    batch = features()
    positions, labels, weights = prediction_targets(batch, "ltr")
    np.testing.assert_array_equal(positions[1], np.arange(T - 1))
    np.testing.assert_array_equal(labels, batch["input_ids"][:, 1:])
    np.testing.assert_array_equal(weights, batch["input_mask"][:, 1:])


def test_sampled_next_tokens_are_real_distinct_and_uniform():
    batch = features()
    predicts_real = batch["input_mask"][:, 1:].sum(axis=1)  # 11, 8, 5 positions
    sample = sample_next_token_positions(7)
    counts = np.zeros((B, T - 1))
    for i in range(600):
        out = sample(batch, tf.constant([i, 7], tf.int64))
        positions, weights = out["next_token_positions"].numpy(), out["next_token_weights"].numpy()
        for row in range(B):
            chosen = positions[row][weights[row] == 1]
            # min(7, real positions) distinct positions, each one whose next token is real.
            assert len(set(chosen)) == len(chosen) == min(7, predicts_real[row])
            assert chosen.max() < predicts_real[row]
            counts[row, chosen] += 1
    # Uniform: each real position is drawn 7/11 (row 0), 7/8 (row 1), 1 (row 2) of the
    # time; 600 draws put each frequency within 5 binomial standard deviations.
    for row, n in enumerate(predicts_real):
        p = min(1.0, 7 / n)
        sd = np.sqrt(600 * p * (1 - p))
        assert np.all(np.abs(counts[row, :n] - 600 * p) <= 5 * sd + 1e-9), counts[row]
    # The same seed gives the same draw; another seed another.
    first = sample(batch, tf.constant([3, 4], tf.int64))["next_token_positions"].numpy()
    again = sample(batch, tf.constant([3, 4], tf.int64))["next_token_positions"].numpy()
    other = sample(batch, tf.constant([5, 4], tf.int64))["next_token_positions"].numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_ltr_on_sampled_positions_scores_those_next_tokens():
    model = build("ltr")
    batch = features()
    every = model.example_sums(batch)  # every position: the reference
    logits = model(batch)["mlm_logits"].numpy()  # [B, T - 1, V]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    sampled = sample_next_token_positions(4)(batch, tf.constant([1, 2], tf.int64))
    positions, labels, weights = (np.asarray(x) for x in prediction_targets(sampled, "ltr"))
    np.testing.assert_array_equal(labels, np.take_along_axis(batch["input_ids"], positions + 1, 1))
    sums = model.example_sums(sampled)
    expected = -np.stack([log_probs[b, positions[b], labels[b]] for b in range(B)])  # [B, 4]
    np.testing.assert_allclose(sums["mlm_loss"], (expected * weights).sum(1), rtol=1e-4)
    np.testing.assert_array_equal(sums["mlm_count"], [4, 4, 4])
    # Drawing at least every position scores every position: the full objective.
    all_positions = sample_next_token_positions(T - 1)(batch, tf.constant([1, 2], tf.int64))
    for key in ("mlm_loss", "mlm_count"):
        np.testing.assert_allclose(model.example_sums(all_positions)[key], every[key], rtol=1e-4)


def test_hidden_metrics_leave_out_the_targets_the_input_shows():
    """mlm_hidden_* are the mlm_* sums over the targets whose token the input does not
    show (80/10/10 leaves 10% unchanged, and a model can copy them); LTR shows none."""
    batch = features()
    rows, slots = np.arange(B), np.array([0, 2, 1])
    ids = batch["input_ids"].copy()  # one unchanged target per row
    ids[rows, batch["masked_lm_positions"][rows, slots]] = batch["masked_lm_ids"][rows, slots]
    batch = {**batch, "input_ids": ids}
    labels = batch["masked_lm_ids"]
    shown = np.take_along_axis(ids, batch["masked_lm_positions"], 1)
    expected = batch["masked_lm_weights"] * (shown != labels)
    assert expected[rows, slots].sum() == 0 and expected.sum() <= 11 - B
    positions, _, weights = prediction_targets(batch, "nsp")
    np.testing.assert_array_equal(hidden_targets(batch, positions, labels, weights, "nsp"),
                                  expected)

    model = build("nsp")
    sums = model.example_sums(batch)
    logits = model(batch)["mlm_logits"].numpy()  # [B, P, V]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    cross_entropy = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    correct = logits.argmax(-1) == labels
    np.testing.assert_allclose(sums["mlm_hidden_loss"], (cross_entropy * expected).sum(1),
                               rtol=1e-4)
    np.testing.assert_array_equal(sums["mlm_hidden_correct"], (correct * expected).sum(1))
    np.testing.assert_array_equal(sums["mlm_hidden_count"], expected.sum(1))
    metrics = mean_metrics({k: float(np.sum(v)) for k, v in sums.items()})
    assert metrics["mlm_hidden_accuracy"] == pytest.approx(
        (correct * expected).sum() / expected.sum())

    ltr = build("ltr").example_sums(batch)
    np.testing.assert_array_equal(ltr["mlm_hidden_count"], ltr["mlm_count"])
    np.testing.assert_array_equal(ltr["mlm_hidden_loss"], ltr["mlm_loss"])


def test_no_nsp_freezes_pooler_and_nsp_head():
    model = build("no_nsp")
    trainable = {v.path for v in model.trainable_variables}
    assert not any("pooler" in p or "/nsp/" in p for p in trainable)
    assert any("mlm" in p for p in trainable)
    sums = model.loss_sums(features())
    assert float(sums["nsp_loss"]) == 0 and float(sums["mlm_count"]) == 11
    assert "nsp_loss" not in mean_metrics({k: float(v) for k, v in sums.items()})


def test_loss_of_a_split_batch_adds_up_to_the_whole():
    """Why the trainer divides sums by the global counts: halves' losses then add up."""
    model = build("nsp")
    batch = features()
    whole = model.loss_sums(batch)
    total = pretraining_loss(whole, whole["mlm_count"], whole["nsp_count"])
    parts = [model.loss_sums({k: v[s] for k, v in batch.items()})
             for s in (slice(0, 1), slice(1, B))]
    split = sum(pretraining_loss(p, whole["mlm_count"], whole["nsp_count"]) for p in parts)
    np.testing.assert_allclose(float(split), float(total), rtol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 300.0])  # 300: the label's prob underflows to 0
def test_cross_entropy_and_prediction_match_tensorflow_ops(scale):
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(0, scale, (7, 50)).astype("float32"))
    labels = tf.constant(rng.integers(0, 50, 7).astype("int32"))
    upstream = tf.constant(rng.uniform(0, 2, 7).astype("float32"))  # e.g. weights / count
    results = []
    for fast in (True, False):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            if fast:  # the labels' logits from the logits here; MaskedLMHead's own below
                loss, predicted = cross_entropy_and_prediction(
                    logits, tf.gather(logits, labels, batch_dims=1))
            else:
                loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
                predicted = tf.argmax(logits, -1, output_type=tf.int32)
            total = tf.reduce_sum(loss * upstream)
        results.append((loss.numpy(), predicted.numpy(), tape.gradient(total, logits).numpy()))
    (loss, predicted, grad), (ref_loss, ref_predicted, ref_grad) = results
    assert np.all(np.isfinite(loss)) and (scale == 1 or ref_loss.max() > 200)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(predicted, ref_predicted)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("objective", ["nsp", "ltr"])
def test_lm_loss_and_gradients_match_the_plain_cross_entropy(objective):
    """The head's own label logits (`MaskedLMHead`) give the loss and the gradient of
    every weight that tf.nn.sparse_softmax_cross_entropy_with_logits gives on its logits."""
    model = build(objective)
    batch = features()
    _, labels, weights = prediction_targets(batch, objective)
    results = []
    for fast in (True, False):
        with tf.GradientTape() as tape:
            if fast:
                loss = model.loss_sums(batch)["mlm_loss"]
            else:
                cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
                    tf.cast(labels, tf.int32), model(batch)["mlm_logits"])
                loss = tf.reduce_sum(cross_entropy * weights)
        grads = tape.gradient(loss, model.trainable_variables)
        results.append((float(loss), [None if g is None else tf.convert_to_tensor(g).numpy()
                                      for g in grads]))
    (loss, grads), (ref_loss, ref_grads) = results
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    # None: the NSP head and the pooler, which the LM loss does not reach.
    assert [g is None for g in grads] == [g is None for g in ref_grads]
    assert sum(g is not None for g in grads) >= 4 * CONFIG.num_hidden_layers
    # atol: float32 rounding on the scale of the largest gradient (the key biases' is 0
    # in exact arithmetic, a softmax being blind to a constant, and ~1e-12 in both).
    scale = max(np.abs(g).max() for g in ref_grads if g is not None)
    for variable, grad, ref in zip(model.trainable_variables, grads, ref_grads):
        if ref is not None:
            np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-6 * scale,
                                       err_msg=variable.path)


@pytest.mark.parametrize("objective", ["nsp", "ltr"])
def test_only_weighted_slots_give_the_same_sums_and_gradients(objective):
    """The LM head over the weighted slots alone (`PredictionSlots`): the batch has
    padding slots (one masked-LM slot, LTR's positions after each sequence's end), and
    a last batch has no prediction at all."""
    model = build(objective)
    batch = features()
    empty = {**batch, "masked_lm_weights": np.zeros((B, P), "float32"),
             "input_mask": np.zeros((B, T), "int32")}
    _, labels, weights = prediction_targets(batch, objective)
    assert (weights.numpy() == 0).any()
    slots = PredictionSlots(weights, only_weighted=True)
    assert slots.take(labels).shape[0] == np.count_nonzero(weights.numpy())
    for data in (batch, empty):
        results = []
        for only_weighted in (True, False):
            with tf.GradientTape() as tape:
                sums = model.example_sums(data, only_weighted=only_weighted)
                loss = tf.reduce_sum(sums["mlm_loss"])
            grads = tape.gradient(loss, model.trainable_variables)
            results.append(({k: v.numpy() for k, v in sums.items()},
                            [None if g is None else tf.convert_to_tensor(g).numpy()
                             for g in grads]))
        (sums, grads), (ref_sums, ref_grads) = results
        assert sums.keys() == ref_sums.keys()
        for key in sums:
            np.testing.assert_allclose(sums[key], ref_sums[key], rtol=1e-5, atol=1e-6,
                                       err_msg=key)
        assert [g is None for g in grads] == [g is None for g in ref_grads]
        scale = max([np.abs(g).max() for g in ref_grads if g is not None] + [1e-30])
        for variable, grad, ref in zip(model.trainable_variables, grads, ref_grads):
            if ref is not None:
                np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-6 * scale,
                                           err_msg=variable.path)
    assert float(np.sum(ref_sums["mlm_count"])) == 0.0  # the empty batch


def test_mlm_head_is_tied_to_the_token_embeddings():
    model = build("nsp")
    with tf.GradientTape() as tape:
        sums = model.loss_sums(features())
    (grad,) = tape.gradient(sums["mlm_loss"], [model.encoder.token_embedding_matrix])
    # Every vocabulary row gets a gradient through the decoder, not only the input ids.
    assert np.all(np.abs(tf.convert_to_tensor(grad).numpy()).sum(axis=1) > 0)


def test_config_round_trip_and_errors():
    model = build("ltr")
    restored = BertPretrainer.from_config(json.loads(json.dumps(model.get_config())))
    assert restored.objective == "ltr" and restored.config == model.config
    with pytest.raises(ValueError, match="unknown objective"):
        BertPretrainer(CONFIG, "mlm")
    with pytest.raises(ValueError, match="causal"):
        BertPretrainer(CONFIG, "ltr")  # ltr needs config.causal=True


def test_mixed_bfloat16_logits_are_float32():
    keras.utils.set_random_seed(0)
    model = BertPretrainer(CONFIG, "nsp", dtype="mixed_bfloat16")
    model.build()
    batch = features()
    outputs = model(batch)
    assert all(outputs[name].dtype == "float32" for name in
               ("mlm_logits", "mlm_label_logits", "nsp_logits"))
    # The labels' logits are the logits' values at the labels, which the matmul rounds
    # to bfloat16 (8 significant bits) and the head's float32 sums do not.
    at_labels = np.take_along_axis(outputs["mlm_logits"].numpy(),
                                   batch["masked_lm_ids"][..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(outputs["mlm_label_logits"].numpy(), at_labels,
                               rtol=2 ** -7, atol=1e-3)
    assert model.encoder.token_embedding_matrix.dtype == "float32"
    float32 = build("nsp", seed=0)
    sums16, sums32 = model.loss_sums(features()), float32.loss_sums(features())
    np.testing.assert_allclose(float(sums16["mlm_loss"]), float(sums32["mlm_loss"]), rtol=0.02)
