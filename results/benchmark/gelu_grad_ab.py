"""A/B of the GELU's gradient (issue 16, item 4): BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128) with `transformer_block.gelu` (its gradient written out: Phi(x) + x * phi(x))
against the same model with the formula differentiated op by op by TensorFlow, in one
process, rounds rotated.

    python results/benchmark/gelu_grad_ab.py --precision float32 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
autodiff / written time with a 95% bootstrap interval over rounds.
"""

import contextlib
import math
from unittest import mock

from keras import ops

from bert_tf import benchmark, transformer_block


def formula_gelu(x):
    """The exact GELU as a formula, for TensorFlow to differentiate op by op."""
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(1 / math.sqrt(2), x.dtype)))


def autodiff_gelu():
    """Models built inside differentiate the formula (`activation` reads the module's gelu)."""
    return mock.patch.object(transformer_block, "gelu", formula_gelu)


def main() -> None:
    benchmark.ab_of_ours_cli(__doc__, "results/benchmark/gelu_grad_ab.py",
                             {"autodiff": autodiff_gelu, "written": contextlib.nullcontext})


if __name__ == "__main__":
    main()
