"""Checkpoint loading (Hugging Face, Google TF1, ours) and parity with two independent
implementations: Hugging Face transformers (PyTorch) and tf-models-official (tf_keras)."""

import contextlib
import json
import logging
import os
import shutil

import numpy as np
import pytest

from bert_tf.checkpoints import (assign_weights, check_max_seq_length, collect_weights,
                                 load_encoder, name_map, read_checkpoint, save_checkpoint)
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.heads import MaskedLMHead, NextSentenceHead

# Real sentences of very different lengths, so the batch has lots of padding.
SENTENCES = [
    ("The cat sat on the mat.", None),
    ("Amrozi accused his brother , whom he called \" the witness \" , of deliberately "
     "distorting his evidence .", "Referring to him as only \" the witness \" , Amrozi accused "
     "his brother of deliberately distorting his evidence ."),
    ("it 's a charming and often affecting journey . ", None),
    ("EU rejects German call to boycott British lamb .", "Peter Blackburn"),
    ("Naïve café owners in Zürich – 東京 – say “hello”!", "Yes."),
]


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    encoder, checkpoint = load_encoder(minilm_dir)
    return encoder, checkpoint


@pytest.fixture(scope="module")
def batch(minilm):
    """Token ids from HF's tokenizer, so these tests isolate the model from tokenization."""
    from transformers import BertTokenizer
    _, checkpoint = minilm
    tokenizer = BertTokenizer(checkpoint.vocab_file, do_lower_case=checkpoint.lower_case)
    encoded = tokenizer([a for a, _ in SENTENCES], [b or "" for _, b in SENTENCES],
                        padding=True, return_tensors="np")
    return {"input_ids": encoded["input_ids"].astype("int32"),
            "input_mask": encoded["attention_mask"].astype("int32"),
            "segment_ids": encoded["token_type_ids"].astype("int32")}


@pytest.mark.slow
def test_parity_with_huggingface_transformers(minilm, minilm_dir, batch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    encoder, _ = minilm
    assert batch["input_mask"].min() == 0  # padding is really exercised
    reference = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                             attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                             token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                             output_hidden_states=True)
    ours = encoder(batch)
    # Every position, padding included: both compute padded rows the same way.
    assert len(ours["encoder_outputs"]) == len(expected.hidden_states) == 7
    # float32 reassociation (oneDNN vs PyTorch kernels) grows with a value's magnitude:
    # 1e-4 relative plus 1e-4 absolute; an approximate GELU would be off by ~3e-3.
    close = lambda a, b, what: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4,
                                                          err_msg=what)
    for layer, (a, b) in enumerate(zip(ours["encoder_outputs"], expected.hidden_states)):
        close(a.numpy(), b.numpy(), f"layer {layer}")
    close(ours["sequence_output"].numpy(), expected.last_hidden_state.numpy(), "sequence")
    close(ours["pooled_output"].numpy(), expected.pooler_output.numpy(), "pooled")


def tfm_encoder_with_weights(config: BertConfig, weights: dict):
    """A tf-models-official BertEncoder (tf_keras) holding the same weights as ours."""
    import tf_keras
    from official.nlp.modeling.networks import BertEncoder as TfmBertEncoder
    heads, head_size, hidden = config.num_attention_heads, config.head_size, config.hidden_size
    encoder = TfmBertEncoder(
        vocab_size=config.vocab_size, hidden_size=hidden, num_layers=config.num_hidden_layers,
        num_attention_heads=heads, max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
        inner_activation=lambda x: tf_keras.activations.gelu(x, approximate=False),
        output_dropout=0.0, attention_dropout=0.0, norm_first=False, dict_outputs=True)
    w = weights
    values = [w["encoder.embeddings.token_embedding.embeddings"],
              w["encoder.embeddings.position_embedding"],
              w["encoder.embeddings.segment_embedding.embeddings"],
              w["encoder.embeddings.layer_norm.gamma"], w["encoder.embeddings.layer_norm.beta"]]
    for i in range(config.num_hidden_layers):
        p = f"encoder.blocks.{i}."
        for part in ("query", "key", "value"):  # tfm's EinsumDense keeps heads as an axis
            values += [w[p + f"attention.{part}.kernel"].reshape(hidden, heads, head_size),
                       w[p + f"attention.{part}.bias"].reshape(heads, head_size)]
        values += [w[p + "attention.output_dense.kernel"].reshape(heads, head_size, hidden),
                   w[p + "attention.output_dense.bias"]]
        for name in ("attention_layer_norm.gamma", "attention_layer_norm.beta",
                     "intermediate.kernel", "intermediate.bias", "output_dense.kernel",
                     "output_dense.bias", "output_layer_norm.gamma", "output_layer_norm.beta"):
            values.append(w[p + name])
    values += [w["encoder.pooler.dense.kernel"], w["encoder.pooler.dense.bias"]]
    encoder.set_weights(values)
    return encoder


@pytest.mark.slow
def test_parity_with_tf_models_official(minilm, batch):
    encoder, checkpoint = minilm
    reference = tfm_encoder_with_weights(checkpoint.config, checkpoint.weights)
    expected = reference({"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                          "input_type_ids": batch["segment_ids"]})
    ours = encoder(batch)
    mask = batch["input_mask"][..., None]  # tfm zeroes nothing but masks queries differently
    for layer, (a, b) in enumerate(zip(ours["encoder_outputs"][1:], expected["encoder_outputs"])):
        assert np.abs((a.numpy() - b.numpy()) * mask).max() <= 1e-4, f"layer {layer + 1}"
    assert np.abs(ours["pooled_output"].numpy() - expected["pooled_output"].numpy()).max() <= 1e-4


# ---------------------------------------------------------------------------- round trips
TINY = BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "##s"]


def tiny_model(seed):
    import keras
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(TINY)
    encoder.build()
    mlm, nsp = MaskedLMHead(TINY.vocab_size, TINY.hidden_size), NextSentenceHead()
    mlm.build(None)
    nsp.build((None, TINY.hidden_size))
    return {"encoder": encoder, "mlm": mlm, "nsp": nsp}


def test_weights_built_to_be_loaded_skip_their_draws_and_nothing_else():
    """Inside skipped_draws the encoder's weights start at zeros; loaded, it holds what a
    randomly drawn encoder loaded holds, and the draws made after it (a task head's) are
    the ones they would have been."""
    import keras
    from bert_tf.heads import ClassificationHead
    from bert_tf.initializers import skipped_draws
    weights = collect_weights(tiny_model(3))

    def loaded_encoder_and_head(skip):
        keras.utils.set_random_seed(1)
        encoder = BertEncoder(TINY)
        with skipped_draws() if skip else contextlib.nullcontext():
            encoder.build()
        head = ClassificationHead(2)
        head.build((None, TINY.hidden_size))
        drawn = encoder.embeddings.token_embedding.embeddings.numpy()
        assign_weights({"encoder": encoder}, weights)
        return encoder, head, drawn

    drawn_encoder, drawn_head, drawn = loaded_encoder_and_head(skip=False)
    skipped_encoder, skipped_head, zeros = loaded_encoder_and_head(skip=True)
    assert np.count_nonzero(drawn) == drawn.size and not np.any(zeros)
    for a, b in [(drawn_encoder, skipped_encoder), (drawn_head, skipped_head)]:
        assert len(a.weights) == len(b.weights)
        for x, y in zip(a.weights, b.weights):
            np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return str(path)


def assert_same_weights(a, b, heads=True):
    wa, wb = collect_weights(a, heads), collect_weights(b, heads)
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


def test_tf1_checkpoint_with_original_names_loads_back(tmp_path, vocab_file):
    """A TF1 checkpoint written by TensorFlow's own saver under the original names."""
    import tensorflow as tf
    source = tiny_model(1)
    directory = tmp_path / "google"
    directory.mkdir()
    weights = collect_weights(source, heads=True)
    variables = {row.tf1: tf.Variable(weights[row.ours].T if row.tf1_transposed
                                      else weights[row.ours]) for row in name_map(2, heads=True)}
    tf.compat.v1.train.Saver(variables).save(None, str(directory / "bert_model.ckpt"),
                                             write_meta_graph=False)
    (directory / "bert_config.json").write_text(json.dumps(
        {k: v for k, v in TINY.to_dict().items() if k not in ("layer_norm_eps", "causal")}))
    shutil.copyfile(vocab_file, directory / "vocab.txt")
    checkpoint = read_checkpoint(str(directory), heads=True)
    assert checkpoint.format == "tf1" and checkpoint.config == TINY
    target = tiny_model(2)
    assign_weights(target, checkpoint.weights, heads=True)
    assert_same_weights(source, target)


def test_own_checkpoint_round_trip(tmp_path, vocab_file):
    source = tiny_model(3)
    directory = str(tmp_path / "ours")
    save_checkpoint(directory, source, vocab_file, lower_case=True, heads=True)
    assert sorted(os.listdir(directory)) == ["config.json", "vocab.txt", "weights.safetensors"]
    checkpoint = read_checkpoint(directory, heads=True)
    assert checkpoint.format == "ours" and checkpoint.lower_case is True
    target = tiny_model(4)
    assign_weights(target, checkpoint.weights, heads=True)
    assert_same_weights(source, target)
    encoder, _ = load_encoder(directory)
    inputs = {"input_ids": np.array([[2, 5, 6, 3]], "int32"),
              "input_mask": np.ones((1, 4), "int32"), "segment_ids": np.zeros((1, 4), "int32")}
    np.testing.assert_allclose(encoder(inputs)["pooled_output"],
                               source["encoder"](inputs)["pooled_output"], atol=1e-6)


def test_huggingface_checkpoint_with_heads_round_trips_through_transformers(tmp_path, vocab_file):
    """Our weights written by transformers' BertForPreTraining load back identically."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    source = tiny_model(5)
    hf_config = transformers.BertConfig(**{k: v for k, v in TINY.to_dict().items()
                                           if k != "causal"})
    model = transformers.BertForPreTraining(hf_config)
    weights = collect_weights(source, heads=True)
    state = {}
    for row in name_map(2, heads=True):
        value = weights[row.ours].T if row.hf_transposed else weights[row.ours]
        state["bert." + row.hf if not row.hf.startswith("cls") else row.hf] = torch.tensor(value)
    missing, _ = model.load_state_dict(state, strict=False)
    assert all("position_ids" in m or "decoder" in m for m in missing), missing
    directory = str(tmp_path / "hf")
    model.save_pretrained(directory)
    shutil.copyfile(vocab_file, os.path.join(directory, "vocab.txt"))
    checkpoint = read_checkpoint(directory, heads=True)
    assert checkpoint.format == "huggingface"
    target = tiny_model(6)
    assign_weights(target, checkpoint.weights, heads=True)
    assert_same_weights(source, target)


# ---------------------------------------------------------------------------- bad input
def test_bad_checkpoints_are_clear_errors(tmp_path, vocab_file):
    with pytest.raises(FileNotFoundError, match="(?s)not a BERT checkpoint directory.*bert_model.ckpt"):
        read_checkpoint(str(tmp_path))
    source = tiny_model(7)
    directory = tmp_path / "ours"
    save_checkpoint(str(directory), source, vocab_file, lower_case=True)
    # Heads asked for but never saved.
    with pytest.raises(ValueError, match="missing.*mlm.transform.kernel"):
        read_checkpoint(str(directory), heads=True)
    # Vocabulary and config disagree.
    (directory / "vocab.txt").write_text("\n".join(VOCAB[:-1]) + "\n")
    with pytest.raises(ValueError, match="11 entries but .*vocab_size=12"):
        read_checkpoint(str(directory))
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    # Weights of another shape than the model.
    checkpoint = read_checkpoint(str(directory))
    wide = tiny_model(8)
    checkpoint.weights["encoder.blocks.1.intermediate.kernel"] = np.zeros((8, 7), "float32")
    with pytest.raises(ValueError, match=r"encoder.blocks.1.intermediate.kernel: checkpoint has "
                                         r"shape \(8, 7\), model expects \(8, 16\)"):
        assign_weights(wide, checkpoint.weights)
    # Another architecture.
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(ValueError, match="expected a BERT config.*roberta"):
        read_checkpoint(str(directory))


def test_positions_beyond_the_pretraining_length_are_a_warning(tmp_path, vocab_file, caplog):
    """config.json's pretraining_seq_length (our pretraining's exports write it) is read
    back; a --max_seq_length beyond it warns of the untrained positions (it is no error:
    fine-tuning may train them); past max_position_embeddings stays an error."""
    source = tiny_model(11)
    save_checkpoint(str(tmp_path / "short"), source, vocab_file, True, pretraining_seq_length=8)
    save_checkpoint(str(tmp_path / "unknown"), source, vocab_file, True)
    short, unknown = (read_checkpoint(str(tmp_path / d)) for d in ("short", "unknown"))
    assert (short.pretraining_seq_length, unknown.pretraining_seq_length) == (8, None)
    with caplog.at_level(logging.WARNING, logger="bert_tf.checkpoints"):
        check_max_seq_length(short, 8)
        check_max_seq_length(unknown, 16)
        assert not caplog.records
        check_max_seq_length(short, 12)
    [record] = caplog.records
    assert "position embeddings 8-11 were never trained" in record.getMessage()
    assert "use --max_seq_length 8" in record.getMessage()
    with pytest.raises(ValueError, match="max_position_embeddings is 16"):
        check_max_seq_length(short, 17)


def test_foreign_checkpoint_missing_a_variable_names_it(tmp_path, vocab_file):
    from safetensors.numpy import save_file
    source = tiny_model(9)
    weights = collect_weights(source)
    state = {row.hf: (weights[row.ours].T if row.hf_transposed else weights[row.ours])
             for row in name_map(2)}
    del state["encoder.layer.1.attention.self.key.bias"]
    directory = tmp_path / "hf"
    directory.mkdir()
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()},
              str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps({**TINY.to_dict(), "model_type": "bert"}))
    shutil.copyfile(vocab_file, directory / "vocab.txt")
    with pytest.raises(ValueError, match=r"1 of .* missing.*encoder.layer.1.attention.self.key.bias"):
        read_checkpoint(str(directory))


def test_heads_none_reads_the_heads_present_and_refuses_half_a_head(tmp_path, vocab_file):
    from safetensors.numpy import load_file, save_file
    source = tiny_model(10)
    directory = tmp_path / "ours"
    save_checkpoint(str(directory), {"encoder": source["encoder"], "mlm": source["mlm"]},
                    vocab_file, lower_case=True, heads=True)
    checkpoint = read_checkpoint(str(directory), heads=None)
    assert checkpoint.heads == ("mlm",)
    assert set(checkpoint.weights) == {row.ours for row in name_map(2, heads=("mlm",))}
    weights = load_file(str(directory / "weights.safetensors"))
    del weights["mlm.output_bias"]
    save_file(weights, str(directory / "weights.safetensors"))
    with pytest.raises(ValueError, match=r"1 of .* missing.*mlm.output_bias"):
        read_checkpoint(str(directory), heads=None)
