"""Config table, layer round trips, masks, precision and XLA for the Keras 3 model."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from bert_tf import heads as H
from bert_tf.attention import SelfAttention, attention_mask
from bert_tf.config import SIZES, BertConfig, config_for_size
from bert_tf.embeddings import BertEmbeddings
from bert_tf.encoder import BertEncoder, Pooler
from bert_tf.transformer_block import TransformerBlock, gelu

TINY = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=24)


def random_inputs(batch=3, seq=10, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, seq + 1, batch)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    return {"input_ids": (rng.integers(1, vocab, (batch, seq)) * mask).astype("int32"),
            "input_mask": mask,
            "segment_ids": ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype("int32")}


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize("name,expected", [
    ("base", 109_482_240),   # the paper's 110M, counting the pooler
    ("large", 335_141_888),  # the paper's 340M
    ("tiny", 4_385_920), ("mini", 11_170_560),
])
def test_parameter_counts_match_built_model(name, expected):
    config = config_for_size(name)
    assert config.num_parameters() == expected
    if name in ("tiny", "mini", "base"):  # large is slow to build; the formula is checked above
        encoder = BertEncoder(config)
        encoder.build()
        assert encoder.count_params() == expected


def test_size_table_has_paper_table6_rows():
    assert {(l, h, a) for l, h, a in SIZES.values()} >= {
        (3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12), (12, 1024, 16), (24, 1024, 16)}
    assert config_for_size("small").intermediate_size == 2048
    with pytest.raises(ValueError, match="unknown model size 'huge'.*tiny"):
        config_for_size("huge")


def test_config_json_round_trip_and_foreign_files(tmp_path):
    config = config_for_size("mini", causal=True)
    assert BertConfig.from_dict(json.loads(config.to_json())) == config
    google = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
              "intermediate_size": 3072, "max_position_embeddings": 512,
              "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 2,
              "vocab_size": 30522}
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(google))
    assert BertConfig.from_json_file(str(path)) == config_for_size("base")
    hf = {**google, "model_type": "bert", "architectures": ["BertModel"], "layer_norm_eps": 1e-12}
    assert BertConfig.from_dict(hf) == config_for_size("base")


def test_config_rejects_other_architectures_and_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match="model_type 'bert'.*roberta"):
        BertConfig.from_dict({"model_type": "roberta", "vocab_size": 5, "hidden_size": 8,
                              "num_hidden_layers": 1, "num_attention_heads": 2})
    with pytest.raises(ValueError, match="not divisible"):
        BertConfig(hidden_size=10, num_attention_heads=3)
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8}')
    with pytest.raises(ValueError, match="config.json.*lacks required keys"):
        BertConfig.from_json_file(str(bad))


# ---------------------------------------------------------------------------- layers
LAYERS = [
    BertEmbeddings(50, 16, 24, 2, 0.1, 1e-12, 0.02),
    SelfAttention(2, 8, 0.1),
    TransformerBlock(16, 2, 32, "gelu", 0.1, 0.1, 1e-12, 0.02),
    Pooler(16), Pooler(16, causal=True),
    BertEncoder(TINY),
    H.MaskedLMHead(50, 16), H.NextSentenceHead(), H.ClassificationHead(3, 0.1),
    H.RegressionHead(), H.SpanHead(), H.MultipleChoiceHead(4), H.TokenClassificationHead(9),
    H.BiLSTMHead(5, units=8), H.FeatureCombiner("weighted_sum_last_four"),
]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda l: type(l).__name__)
def test_get_config_json_round_trip(layer):
    config = json.loads(json.dumps(layer.get_config()))
    clone = type(layer).from_config(config)
    assert clone.get_config() == layer.get_config()


def test_encoder_outputs_and_padding_invariance():
    encoder = BertEncoder(TINY)
    inputs = random_inputs()
    out = encoder(inputs)
    assert out["sequence_output"].shape == (3, 10, 16)
    assert out["pooled_output"].shape == (3, 16)
    assert len(out["encoder_outputs"]) == TINY.num_hidden_layers + 1
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    # Appending padding must not change the outputs at real positions.
    padded = {k: np.pad(v, ((0, 0), (0, 5))) for k, v in inputs.items()}
    out_padded = encoder(padded)
    mask = inputs["input_mask"][..., None]
    np.testing.assert_allclose(out_padded["sequence_output"][:, :10] * mask,
                               out["sequence_output"] * mask, atol=1e-5)
    np.testing.assert_allclose(out_padded["pooled_output"], out["pooled_output"], atol=1e-5)


def test_projections_multiply_rows_for_length_bucketed_inputs():
    """Every projection of a [None, None] batch is one MatMul, fused with its bias (no
    tf.tensordot shape ops around it, no Reshape between the two), forward and backward."""
    encoder = BertEncoder(TINY)
    encoder.build()
    signature = {k: tf.TensorSpec((None, None), tf.int32)
                 for k in ("input_ids", "input_mask", "segment_ids")}

    @tf.function(input_signature=[signature])
    def forward_and_backward(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(encoder(inputs, training=True)["sequence_output"])
        return tape.gradient(loss, encoder.trainable_variables)

    graph = forward_and_backward.get_concrete_function().graph
    ops_by_type = {}
    for op in graph.get_operations():
        ops_by_type.setdefault(op.type, []).append(op)
    assert not [op.name for op in graph.get_operations() if "Tensordot" in op.name]
    # 6 projections a block, each a product forward and two backward; the pooler's one
    # (its output is not in the loss).
    assert len(ops_by_type["MatMul"]) == 3 * 6 * TINY.num_hidden_layers + 1
    for bias_add in ops_by_type["BiasAdd"]:
        assert bias_add.inputs[0].op.type == "MatMul", bias_add.name


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_gelu_gradient_is_the_formulas(dtype, rtol):
    """The written-out gradient of the exact GELU equals autodiff of its formula."""
    x = tf.cast(tf.linspace(-12.0, 12.0, 2001), dtype)
    upstream = tf.cast(tf.random.stateless_normal([2001], seed=[1, 2]), dtype)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = gelu(x)
        formula = 0.5 * x * (1.0 + tf.math.erf(x * tf.cast(0.7071067811865476, dtype)))
    np.testing.assert_allclose(tf.cast(ours, "float32"), tf.cast(formula, "float32"),
                               rtol=rtol, atol=rtol)
    ours_grad = tf.cast(tape.gradient(ours, x, upstream), "float32").numpy()
    want = tf.cast(tape.gradient(formula, x, upstream), "float32").numpy()
    np.testing.assert_allclose(ours_grad, want, rtol=rtol, atol=rtol)
    # Far out the gradient is the step function's: 0 left, 1 right.
    np.testing.assert_allclose(ours_grad[[0, -1]] / upstream.numpy()[[0, -1]].astype("float32"),
                               [0.0, 1.0], atol=1e-6)


def test_causal_mask_hides_the_future():
    mask = attention_mask(np.array([[1, 1, 1, 0]]), causal=True).numpy()[0]
    np.testing.assert_array_equal(mask, [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]])
    encoder = BertEncoder(TINY.replace(causal=True))
    inputs = random_inputs(batch=1, seq=8)
    inputs["input_mask"][:] = 1
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["input_ids"][0, 5:] = (changed["input_ids"][0, 5:] + 7) % 50
    a, b = encoder(inputs)["sequence_output"], encoder(changed)["sequence_output"]
    np.testing.assert_allclose(a[0, :5], b[0, :5], atol=1e-6)  # left context only
    assert np.abs(a[0, 5:] - b[0, 5:]).max() > 1e-3


def test_causal_encoder_pools_its_last_real_token():
    """A left-to-right encoder's [CLS] sees only itself; its sentence vector is the last
    real token's, which sees the whole input (padding of any length after it)."""
    encoder = BertEncoder(TINY.replace(causal=True))
    inputs = random_inputs(batch=3, seq=10)
    out = encoder(inputs)
    last = inputs["input_mask"].sum(axis=1) - 1
    at_last = out["sequence_output"].numpy()[np.arange(3), last]
    np.testing.assert_allclose(out["pooled_output"], encoder.pooler.dense(at_last),
                               rtol=1e-5, atol=1e-6)
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["input_ids"][:, 1] = (changed["input_ids"][:, 1] + 7) % 50
    moved = np.abs(encoder(changed)["pooled_output"] - out["pooled_output"]).max(axis=1)
    assert moved.min() > 1e-6  # every row's vector reads its token 1 ([CLS]'s would not)
    # The bidirectional encoder keeps [CLS].
    encoder = BertEncoder(TINY)
    out = encoder(inputs)
    np.testing.assert_allclose(out["pooled_output"],
                               encoder.pooler.dense(out["sequence_output"][:, 0]),
                               rtol=1e-5, atol=1e-6)


def test_too_long_sequence_is_a_clear_error():
    encoder = BertEncoder(TINY)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings=24"):
        encoder(random_inputs(seq=30))


def test_heads_shapes():
    encoder = BertEncoder(TINY)
    inputs = random_inputs()
    out = encoder(inputs)
    seq, pooled = out["sequence_output"], out["pooled_output"]
    positions = np.array([[1, 2], [0, 3], [4, 4]])
    logits = H.MaskedLMHead(50, 16)(seq, positions, encoder.token_embedding_matrix)
    assert logits.shape == (3, 2, 50) and logits.dtype == "float32"
    assert H.NextSentenceHead()(pooled).shape == (3, 2)
    assert H.ClassificationHead(3)(pooled).shape == (3, 3)
    assert H.RegressionHead()(pooled).shape == (3,)
    start, end = H.SpanHead()(seq)
    assert start.shape == end.shape == (3, 10)
    assert H.TokenClassificationHead(9)(seq).shape == (3, 10, 9)
    assert H.MultipleChoiceHead(3)(pooled).shape == (1, 3)
    assert H.BiLSTMHead(5, units=8)(seq, inputs["input_mask"]).shape == (3, 10, 5)
    assert H.BiLSTMHead(5, units=8, per_token=False)(seq, inputs["input_mask"]).shape == (3, 5)
    outputs = out["encoder_outputs"] + out["encoder_outputs"][1:]  # 5 layers
    for mode, read, width in [("embeddings", (0,), 16), ("second_to_last", (3,), 16),
                              ("last", (4,), 16), ("weighted_sum_last_four", (1, 2, 3, 4), 16),
                              ("concat_last_four", (1, 2, 3, 4), 64),
                              ("weighted_sum_all", (0, 1, 2, 3, 4), 16)]:
        assert H.feature_layers(mode, len(outputs)) == read
        stacked = ops.stack([outputs[i] for i in read], axis=2)  # [B, T, K, H]
        features = H.FeatureCombiner(mode)(stacked)
        assert features.shape == (3, 10, width)
        if mode == "concat_last_four":  # each token's four layers, one after another
            np.testing.assert_array_equal(features[..., 16:32], outputs[2])
        elif not mode.startswith("weighted_sum"):
            np.testing.assert_array_equal(features, outputs[read[0]])
    # Fewer than four blocks: the "last four" modes read all L + 1 outputs.
    assert H.feature_layers("concat_last_four", 3) == (0, 1, 2)


def test_masked_lm_decoder_is_tied_to_token_embeddings():
    encoder = BertEncoder(TINY)
    out = encoder(random_inputs())
    head = H.MaskedLMHead(50, 16)
    positions = np.zeros((3, 1), "int32")
    before = head(out["sequence_output"], positions, encoder.token_embedding_matrix)
    encoder.token_embedding_matrix.assign(encoder.token_embedding_matrix * 2.0)
    after = head(out["sequence_output"], positions, encoder.token_embedding_matrix)
    np.testing.assert_allclose(after, 2.0 * before, rtol=1e-4, atol=1e-5)  # output bias is 0
    assert len(head.trainable_weights) == 5  # transform kernel/bias, LN gamma/beta, output bias


def test_mixed_bfloat16_and_jit_compile():
    encoder = BertEncoder(TINY, dtype="mixed_bfloat16")
    inputs = random_inputs()
    reference = BertEncoder(TINY)
    reference.build()
    encoder.build()
    encoder.set_weights(reference.get_weights())
    out = encoder(inputs)
    assert out["sequence_output"].dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in encoder.weights)  # float32 master weights
    ref = reference(inputs)["sequence_output"].numpy()
    assert np.abs(out["sequence_output"].numpy().astype("float32") - ref).max() < 0.1

    head = H.ClassificationHead(2, dtype="mixed_bfloat16")
    optimizer = keras.optimizers.AdamW(1e-3)

    @tf.function(jit_compile=True)
    def train_step(batch, labels):
        with tf.GradientTape() as tape:
            logits = head(encoder(batch, training=True)["pooled_output"], training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        variables = encoder.trainable_variables + head.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    labels = np.array([0, 1, 0])
    losses = [float(train_step(inputs, labels)) for _ in range(15)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
