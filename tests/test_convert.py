"""bert_tf.convert: every target is read back by the real library on the other side
(transformers, tf-models-official, keras-hub) with our outputs, and round trips
ours -> X -> ours give back every weight bit for bit."""

import json
import os

import numpy as np
import pytest

from bert_tf.checkpoints import (assign_weights, build_model, collect_weights, load_encoder,
                                 read_checkpoint, save_checkpoint)
from bert_tf.config import BertConfig
from bert_tf.convert import WRITERS, convert, main

TINY = BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "##s"]
# [CLS] the cat sat [SEP] + padding, and a pair with segment B.
INPUTS = {"input_ids": np.array([[2, 5, 6, 7, 3, 0, 0], [2, 5, 6, 3, 8, 9, 3]], "int32"),
          "input_mask": np.array([[1, 1, 1, 1, 1, 0, 0], [1] * 7], "int32"),
          "segment_ids": np.array([[0] * 7, [0, 0, 0, 0, 1, 1, 1]], "int32")}
ALL_POSITIONS = np.tile(np.arange(7, dtype="int32"), (2, 1))


@pytest.fixture
def source(tmp_path):
    """A tiny random model with both heads, saved in our format."""
    import keras
    keras.utils.set_random_seed(0)
    root = build_model(TINY, heads=True)
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    directory = str(tmp_path / "source")
    save_checkpoint(directory, root, str(tmp_path / "vocab.txt"), lower_case=True, heads=True)
    return root, directory


def outputs(root, inputs=INPUTS):
    """Our encoder outputs and, where the heads exist, MLM logits at every position."""
    out = {k: v.numpy() for k, v in root["encoder"](inputs).items() if k != "encoder_outputs"}
    if "mlm" in root:
        out["mlm_logits"] = root["mlm"](out["sequence_output"], ALL_POSITIONS,
                                        root["encoder"].token_embedding_matrix).numpy()
    if "nsp" in root:
        out["nsp_logits"] = root["nsp"](out["pooled_output"]).numpy()
    return out


def assert_close(actual, expected, mask=None, tolerance=1e-4):
    """float32 reassociation tolerance; `mask` [B, T] compares real tokens only."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if mask is not None:
        actual, expected = actual * mask[..., None], expected * mask[..., None]
    np.testing.assert_allclose(actual, expected, atol=tolerance, rtol=tolerance)


# ---------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("target", sorted(WRITERS))
def test_round_trip_through_every_format_is_exact(tmp_path, source, target):
    root, directory = source
    convert(directory, target, str(tmp_path / target))
    done = convert(str(tmp_path / target), "ours", str(tmp_path / "back"))
    back = read_checkpoint(str(tmp_path / "back"), heads=None)
    expected = collect_weights(root, heads=True)
    if target == "keras_hub":  # keras-hub has no next-sentence head
        expected = {k: v for k, v in expected.items() if not k.startswith("nsp.")}
    assert back.weights.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(back.weights[name], value, err_msg=name)
    assert back.config == TINY and back.lower_case is True
    assert done.heads == (("mlm",) if target == "keras_hub" else ("mlm", "nsp"))
    with open(back.vocab_file, encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == VOCAB


# ---------------------------------------------------------------------------- Hugging Face
def test_hf_output_loads_in_transformers_with_our_outputs(tmp_path, source):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    root, directory = source
    out = str(tmp_path / "hf")
    convert(directory, "hf", out)
    model, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    encoder = transformers.BertModel.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_tokens_to_ids(["the", "cat"]) == [5, 6]
    torch_inputs = {"input_ids": torch.tensor(INPUTS["input_ids"], dtype=torch.long),
                    "attention_mask": torch.tensor(INPUTS["input_mask"], dtype=torch.long),
                    "token_type_ids": torch.tensor(INPUTS["segment_ids"], dtype=torch.long)}
    with torch.no_grad():
        heads, base = model.eval()(**torch_inputs), encoder(**torch_inputs)
    ours = outputs(root)
    assert_close(heads.prediction_logits, ours["mlm_logits"])
    assert_close(heads.seq_relationship_logits, ours["nsp_logits"])
    assert_close(base.last_hidden_state, ours["sequence_output"])
    assert_close(base.pooler_output, ours["pooled_output"])


@pytest.mark.parametrize("heads, architecture",
                         [((), "BertModel"), (("mlm",), "BertForMaskedLM")])
def test_hf_architecture_follows_the_heads(tmp_path, source, heads, architecture):
    transformers = pytest.importorskip("transformers")
    root, directory = source
    partial = str(tmp_path / "partial")
    save_checkpoint(partial, {k: root[k] for k in ("encoder", *heads)},
                    os.path.join(directory, "vocab.txt"), True, heads=heads)
    convert(partial, "hf", str(tmp_path / "hf"))
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == [architecture]
    # The pooler is kept for BertModel even where BertForMaskedLM has no use for it.
    _, info = getattr(transformers, architecture).from_pretrained(
        str(tmp_path / "hf"), output_loading_info=True)
    assert not info["missing_keys"], info


# ---------------------------------------------------------------------------- Google TF1
def original_variables(num_layers, vocab, hidden, intermediate, positions, segments):
    """{name: shape} that google-research/bert's modeling.py and run_pretraining.py create,
    written out independently of our name map."""
    names = {"bert/embeddings/word_embeddings": [vocab, hidden],
             "bert/embeddings/token_type_embeddings": [segments, hidden],
             "bert/embeddings/position_embeddings": [positions, hidden],
             "bert/embeddings/LayerNorm/beta": [hidden],
             "bert/embeddings/LayerNorm/gamma": [hidden],
             "bert/pooler/dense/kernel": [hidden, hidden], "bert/pooler/dense/bias": [hidden],
             "cls/predictions/transform/dense/kernel": [hidden, hidden],
             "cls/predictions/transform/dense/bias": [hidden],
             "cls/predictions/transform/LayerNorm/beta": [hidden],
             "cls/predictions/transform/LayerNorm/gamma": [hidden],
             "cls/predictions/output_bias": [vocab],
             "cls/seq_relationship/output_weights": [2, hidden],
             "cls/seq_relationship/output_bias": [2]}
    for i in range(num_layers):
        layer = f"bert/encoder/layer_{i}"
        for part in ("attention/self/query", "attention/self/key", "attention/self/value",
                     "attention/output/dense"):
            names[f"{layer}/{part}/kernel"] = [hidden, hidden]
            names[f"{layer}/{part}/bias"] = [hidden]
        names[f"{layer}/intermediate/dense/kernel"] = [hidden, intermediate]
        names[f"{layer}/intermediate/dense/bias"] = [intermediate]
        names[f"{layer}/output/dense/kernel"] = [intermediate, hidden]
        names[f"{layer}/output/dense/bias"] = [hidden]
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            names[f"{layer}/{norm}/beta"], names[f"{layer}/{norm}/gamma"] = [hidden], [hidden]
    return names


def test_google_output_has_the_original_names_and_shapes(tmp_path, source):
    import tensorflow as tf
    _, directory = source
    convert(directory, "google", str(tmp_path / "google"))
    assert sorted(os.listdir(tmp_path / "google")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "vocab.txt"]
    written = dict(tf.train.list_variables(str(tmp_path / "google" / "bert_model.ckpt")))
    assert written == original_variables(2, vocab=12, hidden=8, intermediate=16, positions=16,
                                         segments=2)


def tfm_pretrainer(config: BertConfig):
    """tf-models-official's BertEncoder + BertPretrainerV2 (MLM) with the exact GELU, as
    we compute it (tfm reads "gelu" from bert_config.json as the tanh approximation)."""
    import tf_keras
    from official.nlp.modeling import models, networks
    exact = lambda x: tf_keras.activations.gelu(x, approximate=False)
    encoder = networks.BertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
        inner_activation=exact, output_dropout=0.0, attention_dropout=0.0, dict_outputs=True)
    pretrainer = models.BertPretrainerV2(encoder_network=encoder, mlm_activation=exact)
    pretrainer(pretrainer.inputs)
    return encoder, pretrainer


def tfm_restore(google_dir, tmp_path, converted_model):
    """Runs tf-models-official's own TF1 -> TF2 converter on our output and restores its
    result, checking that every tfm variable found its value."""
    import tensorflow as tf
    from official.legacy.bert import configs
    from official.nlp.tools.tf2_bert_encoder_checkpoint_converter import convert_checkpoint
    bert_config = configs.BertConfig.from_json_file(os.path.join(google_dir, "bert_config.json"))
    out = str(tmp_path / "tfm" / "ckpt")
    convert_checkpoint(bert_config, out, os.path.join(google_dir, "bert_model.ckpt"),
                       checkpoint_model_name="model", converted_model=converted_model)
    encoder, pretrainer = tfm_pretrainer(read_checkpoint(google_dir).config)
    model = pretrainer if converted_model == "pretrainer" else encoder
    saved = tf.train.latest_checkpoint(str(tmp_path / "tfm"))
    tf.train.Checkpoint(model=model).read(saved).assert_existing_objects_matched()
    return model


def tfm_inputs(inputs):
    return {"input_word_ids": inputs["input_ids"], "input_mask": inputs["input_mask"],
            "input_type_ids": inputs["segment_ids"]}


def test_google_output_converts_with_tf_models_official(tmp_path, source):
    root, directory = source
    convert(directory, "google", str(tmp_path / "google"))
    pretrainer = tfm_restore(str(tmp_path / "google"), tmp_path, "pretrainer")
    theirs = pretrainer({**tfm_inputs(INPUTS), "masked_lm_positions": ALL_POSITIONS})
    ours = outputs(root)
    # tfm lets padded queries attend differently: compare real tokens.
    assert_close(theirs["sequence_output"], ours["sequence_output"], INPUTS["input_mask"])
    assert_close(theirs["pooled_output"], ours["pooled_output"])
    assert_close(theirs["mlm_logits"], ours["mlm_logits"])


# ---------------------------------------------------------------------------- keras-hub
def keras_hub_inputs(inputs):
    return {"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
            "padding_mask": inputs["input_mask"]}


def test_keras_hub_output_loads_as_a_preset_with_our_outputs(tmp_path, source):
    keras_hub = pytest.importorskip("keras_hub")
    from bert_tf.heads import MaskedLMHead
    root, directory = source
    out = str(tmp_path / "keras_hub")
    done = convert(directory, "keras_hub", out)
    assert any("next-sentence" in note for note in done.caveats)
    backbone = keras_hub.models.BertBackbone.from_preset(out)
    masked_lm = keras_hub.models.BertMaskedLM.from_preset(out)
    assert masked_lm.preprocessor.tokenizer.token_to_id("cat") == 6
    # keras-hub hard-codes the tanh GELU in its encoder and, in its MLM head, the exact GELU
    # with LayerNorm epsilon 1e-5: the same weights in our layers set up that way.
    same = build_model(TINY.replace(hidden_act="gelu_new"))
    same["mlm"] = MaskedLMHead(TINY.vocab_size, TINY.hidden_size, "gelu", layer_norm_eps=1e-5)
    same["mlm"].build(None)
    assign_weights(same, collect_weights(root, heads=("mlm",)), heads=("mlm",))
    ours, theirs = outputs(same), backbone(keras_hub_inputs(INPUTS))
    assert_close(theirs["sequence_output"], ours["sequence_output"], INPUTS["input_mask"])
    assert_close(theirs["pooled_output"], ours["pooled_output"])
    logits = masked_lm({**keras_hub_inputs(INPUTS), "mask_positions": ALL_POSITIONS})
    assert_close(logits, ours["mlm_logits"], INPUTS["input_mask"])


def test_preset_saved_by_keras_hub_itself_loads_as_what_keras_hub_computes(tmp_path):
    """Reading (not our writer): a preset keras-hub wrote has no metadata of ours, so its
    config is what BertBackbone computes: the tanh GELU."""
    keras_hub = pytest.importorskip("keras_hub")
    import keras
    keras.utils.set_random_seed(1)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=12, num_layers=2, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16,
                                             max_sequence_length=16)
    out = str(tmp_path / "preset")
    backbone.save_to_preset(out)
    keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=False).save_to_preset(out)
    checkpoint = read_checkpoint(out, heads=None)
    assert checkpoint.format == "keras_hub" and checkpoint.heads == ()
    assert checkpoint.config == TINY.replace(hidden_act="gelu_new")
    assert checkpoint.lower_case is False
    encoder, _ = load_encoder(out)
    theirs, ours = backbone(keras_hub_inputs(INPUTS)), encoder(INPUTS)
    assert_close(theirs["sequence_output"], ours["sequence_output"], INPUTS["input_mask"])
    assert_close(theirs["pooled_output"], ours["pooled_output"])


# ---------------------------------------------------------------------------- CLI, refusals
def test_command_line(tmp_path, source, capsys):
    _, directory = source
    main(["--checkpoint", directory, "--to", "google", "--output_dir", str(tmp_path / "g")])
    printed = capsys.readouterr().out
    assert (f"wrote google (encoder, mlm, nsp) to {tmp_path / 'g'} from {directory} (ours format)"
            in printed)
    assert "tanh approximation" in printed  # the original code's 'gelu' is not ours
    with pytest.raises(SystemExit):
        main(["--checkpoint", directory, "--to", "onnx", "--output_dir", str(tmp_path / "x")])


def test_causal_models_go_to_hf_as_decoders_and_are_refused_elsewhere(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import keras
    keras.utils.set_random_seed(2)
    root = build_model(TINY.replace(causal=True), heads=("mlm",))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    save_checkpoint(str(tmp_path / "ltr"), root, str(tmp_path / "vocab.txt"), True, heads=True)
    for target in ("google", "keras_hub"):
        with pytest.raises(ValueError, match=f"--to {target}: this model is causal"):
            convert(str(tmp_path / "ltr"), target, str(tmp_path / target))
        assert not (tmp_path / target).exists()
    conversion = convert(str(tmp_path / "ltr"), "hf", str(tmp_path / "hf"))
    assert any("last real token" in note for note in conversion.caveats)
    model, info = transformers.BertLMHeadModel.from_pretrained(str(tmp_path / "hf"),
                                                               output_loading_info=True)
    assert model.config.is_decoder and not info["missing_keys"], info
    with torch.no_grad():
        logits = model.eval()(
            input_ids=torch.tensor(INPUTS["input_ids"], dtype=torch.long),
            attention_mask=torch.tensor(INPUTS["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(INPUTS["segment_ids"], dtype=torch.long)).logits
    assert_close(logits, outputs(root)["mlm_logits"], INPUTS["input_mask"])
    convert(str(tmp_path / "hf"), "ours", str(tmp_path / "back"))
    assert read_checkpoint(str(tmp_path / "back")).config.causal


# ---------------------------------------------------------------------------- real checkpoint
# Real sentences of very different lengths, so the batch has lots of padding.
SENTENCES = [
    ("The cat sat on the mat.", ""),
    ("Amrozi accused his brother , whom he called \" the witness \" , of deliberately "
     "distorting his evidence .", "Referring to him as only \" the witness \" , Amrozi accused "
     "his brother of deliberately distorting his evidence ."),
    ("EU rejects German call to boycott British lamb .", "Peter Blackburn"),
    ("Naïve café owners in Zürich – 東京 – say “hello”!", "Yes."),
]


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    """The shipped checkpoint, and token ids from HF's tokenizer (these tests are about the
    models, not tokenization)."""
    from transformers import BertTokenizer
    encoder, checkpoint = load_encoder(minilm_dir)
    tokenizer = BertTokenizer(checkpoint.vocab_file, do_lower_case=checkpoint.lower_case)
    encoded = tokenizer([a for a, _ in SENTENCES], [b for _, b in SENTENCES], padding=True,
                        return_tensors="np")
    batch = {"input_ids": encoded["input_ids"].astype("int32"),
             "input_mask": encoded["attention_mask"].astype("int32"),
             "segment_ids": encoded["token_type_ids"].astype("int32")}
    assert batch["input_mask"].min() == 0  # padding is really exercised
    return encoder, checkpoint, batch


def hf_outputs(directory, batch, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel.from_pretrained(directory).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long))
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def tfm_outputs(directory, batch, tmp_path):
    out = tfm_restore(directory, tmp_path, "encoder")(tfm_inputs(batch))
    return out["sequence_output"].numpy(), out["pooled_output"].numpy()


def keras_hub_outputs(directory, batch, tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    out = keras_hub.models.BertBackbone.from_preset(directory)(keras_hub_inputs(batch))
    return out["sequence_output"].numpy(), out["pooled_output"].numpy()


# Each target read by the library on the other side; keras-hub computes the tanh GELU
# whatever the config says, so it is compared with ours computing it too.
THEIR_OUTPUTS = {"hf": (hf_outputs, "gelu"), "google": (tfm_outputs, "gelu"),
                 "keras_hub": (keras_hub_outputs, "gelu_new")}


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(THEIR_OUTPUTS))
def test_shipped_checkpoint_in_each_library_and_back(tmp_path, minilm, target):
    encoder, checkpoint, batch = minilm
    out = str(tmp_path / target)
    convert(checkpoint.directory, target, out)
    their_outputs, hidden_act = THEIR_OUTPUTS[target]
    sequence, pooled = their_outputs(out, batch, tmp_path)
    if hidden_act != checkpoint.config.hidden_act:
        encoder, _ = load_encoder(checkpoint.directory, hidden_act=hidden_act)
    ours = encoder(batch)
    assert_close(sequence, ours["sequence_output"], batch["input_mask"])
    assert_close(pooled, ours["pooled_output"])
    convert(out, "ours", str(tmp_path / "back"))
    back = read_checkpoint(str(tmp_path / "back"), heads=None)
    assert back.config == checkpoint.config and back.weights.keys() == checkpoint.weights.keys()
    for name, value in checkpoint.weights.items():
        np.testing.assert_array_equal(back.weights[name], value, err_msg=name)
