"""A/B of the projections' layout (issue 16, items 1 and 4): every Dense of the encoder
multiplying [B * T, H] rows (`bert_tf.attention.as_rows`, one MatMul + BiasAdd each)
against the same model with [B, T, H] inputs, which Keras's Dense sends through
tf.tensordot (~20 shape ops around the MatMul, a Reshape between it and the bias add),
in one process, rounds rotated. Same weights, same products.

    python results/benchmark/rows_ab.py --precision float32 --rounds 8   # the train step
    python results/benchmark/rows_ab.py --trace --rounds 8               # its trace

The default times BERT-Base's train step of `bert_tf.benchmark` (batch 32 x 128, static
shapes); --trace times tracing the fine-tuning train step of the shipped MiniLM's layout
for length-bucketed ([None, None]) batches (`trace_ab.py`'s measurement), and prints each
layout's op count. Prints the provenance header, each contender's median with min-max and
tensordot / rows time with a 95% bootstrap interval over rounds.
"""

import argparse
import contextlib
import pathlib
import sys
from unittest import mock

from bert_tf import attention, benchmark, timing, transformer_block

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import attention_scale_ab  # noqa: E402  (sibling scripts)
import trace_ab  # noqa: E402


# SelfAttention.call as it was: the projections take [B, T, H] (attention_scale_ab.py's
# copy of it, with the committed scaling and float32 softmax).
tensordot_attention_call = attention_scale_ab._call(scale_queries=False, float32_softmax=True)


def tensordot_block_call(self, x, mask, training=None):
    """TransformerBlock.call as it was: the feed-forward takes [B, T, H]."""
    attended = self.dropout_layer(self.attention(x, mask, training=training), training=training)
    h = self.attention_layer_norm(x + attended)
    ffn = self.output_dense(self.intermediate(h))
    return self.output_layer_norm(h + self.dropout_layer(ffn, training=training))


@contextlib.contextmanager
def tensordot():
    """Models built inside project [B, T, H] tensors, as before."""
    with mock.patch.object(attention.SelfAttention, "call", tensordot_attention_call), \
            mock.patch.object(transformer_block.TransformerBlock, "call", tensordot_block_call):
        yield


VARIANTS = {"tensordot": tensordot, "rows": contextlib.nullcontext}


def trace_rounds(rounds: int) -> None:
    """Rotated rounds of `trace_ab.traced_train_step` under each layout."""
    print("\n".join(timing.header("results/benchmark/rows_ab.py")), flush=True)
    counts = {}

    def trace(name):
        with VARIANTS[name]():
            seconds, counts[name], _ = trace_ab.traced_train_step(lambda o: o)
        return seconds

    seconds = timing.measured_rounds({name: lambda n=name: trace(n) for name in VARIANTS},
                                     rounds, log=lambda line: print(line, flush=True))
    for name in VARIANTS:
        median, low, high = timing.spread(seconds[name])
        print(f"{name:>9}: {counts[name]} ops; trace {median:.2f} s (min {low:.2f}, "
              f"max {high:.2f})")
    ratio, low, high = timing.bootstrap_ratio(seconds["tensordot"], seconds["rows"])
    print(f"trace time tensordot / rows: {ratio:.2f}x [95% CI {low:.2f}, {high:.2f}]")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", action="store_true", help="time the trace, not the step")
    p.add_argument("--precision", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=1, help="steps per round")
    args = p.parse_args()
    if args.trace:
        trace_rounds(args.rounds)
    else:
        benchmark.ab_of_ours("results/benchmark/rows_ab.py", VARIANTS, args.precision,
                             args.rounds, args.steps)


if __name__ == "__main__":
    main()
