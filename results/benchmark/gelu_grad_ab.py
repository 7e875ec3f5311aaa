"""A/B of the GELU's gradient (issue 16, item 4): BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128) with `transformer_block.gelu` (its gradient written out: Phi(x) + x * phi(x))
against the same model with the formula differentiated op by op by TensorFlow, in one
process, rounds rotated.

    python results/benchmark/gelu_grad_ab.py --precision float32 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
autodiff / written time with a 95% bootstrap interval over rounds.
"""

import argparse
import math
from unittest import mock

from keras import ops

from bert_tf import benchmark, timing, transformer_block
from bert_tf.config import BertConfig


def formula_gelu(x):
    """The exact GELU as a formula, for TensorFlow to differentiate op by op."""
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(1 / math.sqrt(2), x.dtype)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=1, help="steps per round")
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/gelu_grad_ab.py")), flush=True)
    config = BertConfig()
    batch = benchmark.random_batch(config, 32, 128)
    # Built and traced (warmed up) with the formula: `activation` reads the module's gelu.
    with mock.patch.object(transformer_block, "gelu", formula_gelu):
        autodiff_peer = benchmark.ours(config, batch, "train", args.precision, False)
        autodiff_peer.step()
    written_peer = benchmark.ours(config, batch, "train", args.precision, False)
    written_peer.step()

    def runner(peer):
        def run():
            for _ in range(args.steps):
                peer.step()  # returns the loss as numpy: the step has finished
        return run

    seconds = timing.run_rounds({"autodiff": runner(autodiff_peer), "written": runner(written_peer)},
                                args.rounds, log=lambda s: print(s, flush=True))
    for name, values in seconds.items():
        median, low, high = timing.spread([v / args.steps for v in values])
        print(f"{name:<8} {median:6.3f} s/step ({low:.3f}-{high:.3f})")
    ratio, low, high = timing.bootstrap_ratio(seconds["autodiff"], seconds["written"])
    print(f"{args.precision}: autodiff / written time = {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
