"""BertConfig: the one description of a BERT architecture, and the table of sizes.

Field names follow Google's `bert_config.json` (and Hugging Face's `config.json`,
which uses the same names), so both files load without a rename table.
"""

import dataclasses
import json

from bert_tf.cli import InputError
from bert_tf.files import read_json


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Architecture hyperparameters of a BERT encoder.

    Args:
        vocab_size: WordPiece vocabulary size.
        hidden_size: width H of every layer.
        num_hidden_layers: number of transformer blocks L.
        num_attention_heads: attention heads A; must divide `hidden_size`.
        intermediate_size: feed-forward inner width (the paper uses 4H).
        hidden_act: feed-forward activation; BERT uses the exact (erf) GELU.
        hidden_dropout_prob: dropout on embeddings and every residual branch.
        attention_probs_dropout_prob: dropout on attention probabilities.
        max_position_embeddings: number of learned positions (512 in the paper).
        type_vocab_size: number of segment ids (2: sentence A and B).
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon (1e-12 in the original code).
        causal: left-to-right attention (the paper's "LTR" ablation); the model
            stays left-only when fine-tuned.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    causal: bool = False

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}")
        if self.hidden_act not in ("gelu", "gelu_new", "relu"):
            raise ValueError(f"hidden_act must be gelu, gelu_new or relu, got {self.hidden_act!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes) -> "BertConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        """Reads our own dict, Google's bert_config.json or Hugging Face's config.json.

        Keys of other architectures' configs (e.g. HF `architectures`, `model_type`)
        are ignored, but a config that is not BERT-shaped is refused.
        """
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(
                f"expected a BERT config (model_type 'bert'), got model_type={model_type!r}")
        missing = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                               "num_attention_heads") if k not in values]
        if missing:
            raise ValueError(f"BERT config lacks required keys {missing}; got keys {sorted(values)}")
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in values.items() if k in names}
        if "intermediate_size" not in known:
            known["intermediate_size"] = 4 * known["hidden_size"]
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute (learned) position embeddings are BERT's")
        return cls(**known)

    @classmethod
    def from_json_file(cls, path: str) -> "BertConfig":
        values = read_json(path)
        if not isinstance(values, dict):
            raise InputError(path, None, f"a JSON {type(values).__name__}; expected an object "
                                         f"of BertConfig fields")
        try:
            return cls.from_dict(values)
        except (ValueError, TypeError) as e:
            raise InputError(path, None, str(e)) from None

    def num_parameters(self, with_pooler: bool = True) -> int:
        """Parameter count of the encoder, from the shapes alone."""
        h, i = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        attention = 4 * (h * h + h) + 2 * h  # q, k, v, output dense; LayerNorm
        feed_forward = (h * i + i) + (i * h + h) + 2 * h
        pooler = h * h + h if with_pooler else 0
        return embeddings + self.num_hidden_layers * (attention + feed_forward) + pooler


# (layers, hidden, heads) -> parameters with pooler at vocab 30,522 (checked in tests).
# tiny..medium are the Turc et al. (2019) small BERTs; base/large the paper's;
# "LxH_A" names are sizes without a name: the extra rows of the paper's Table 6, and
# L4_H128_A2 (Turc et al.'s, unnamed there), the cpu scale's larger Table 6 model.
SIZES = {
    #                 L   H     A      params
    "tiny":         (2,  128,  2),   #   4.4M
    "mini":         (4,  256,  4),   #  11.2M
    "small":        (4,  512,  8),   #  28.8M
    "medium":       (8,  512,  8),   #  41.4M
    "base":         (12, 768,  12),  # 109.5M
    "large":        (24, 1024, 16),  # 335.1M
    "L3_H768_A12":  (3,  768,  12),  #  45.7M
    "L6_H768_A3":   (6,  768,  3),   #  67.0M
    "L6_H768_A12":  (6,  768,  12),  #  67.0M
    "L12_H1024_A16": (12, 1024, 16),  # 184.0M
    "L4_H128_A2":   (4,  128,  2),   #   4.8M
}


def config_for_size(name: str, **overrides) -> BertConfig:
    """The BertConfig of a named size, e.g. `config_for_size("base")`."""
    if name not in SIZES:
        raise ValueError(f"unknown model size {name!r}; expected one of {', '.join(SIZES)}")
    layers, hidden, heads = SIZES[name]
    return BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden, **overrides)
