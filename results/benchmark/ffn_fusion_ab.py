"""A/B of fusing the feed-forward's bias and GELU (issue 16, item 4's "fused bias+GELU"), on
the transformer block's feed-forward alone: forward and backward of Dense(I) -> GELU ->
Dense(H) on MiniLM's widths (H 384, I 1536), a [32, 64, 384] float32 input (MRPC-shaped),
in one process, rounds rotated.

  keras          `TransformerBlock.intermediate` / `output_dense` called on the [B, T, H]
                 input, as the block did until `rows_ab.py`: Keras Dense (a 3-D tensordot,
                 a broadcast Add for the bias) and `transformer_block.gelu`
  matmul2d       the same weights through a 2-D tf.matmul and tf.nn.bias_add, the pattern
                 grappler's remapper fuses into one oneDNN MatMul + BiasAdd
  xla_gelu       as keras, with the GELU in a tf.function(jit_compile=True): XLA fuses its
                 elementwise ops (and their gradient's) into one loop
  xla_bias_gelu  matmul2d with the bias add and the GELU in one XLA function

Every contender's gradients are checked against keras's first (rtol 1e-4).

    python results/benchmark/ffn_fusion_ab.py --rounds 8 --steps 10

Prints the provenance header, each contender's median milliseconds per step with its
min-max, and keras / contender time with a 95% bootstrap interval over rounds.
"""

import argparse

import numpy as np
import tensorflow as tf

from bert_tf import timing
from bert_tf.transformer_block import TransformerBlock, gelu

xla_gelu = tf.function(gelu, jit_compile=True)
xla_bias_gelu = tf.function(lambda x, bias: gelu(x + bias), jit_compile=True)


def feed_forwards(block: TransformerBlock) -> dict:
    """{name: x [B, T, H] -> the feed-forward's output [B, T, H]}, one set of weights."""
    inner, outer = block.intermediate, block.output_dense

    def dense_2d(x2d, layer):
        return tf.nn.bias_add(tf.matmul(x2d, layer.kernel), layer.bias)

    def keras_ffn(x):
        return outer(inner(x))

    def matmul2d(x):
        x2d = tf.reshape(x, [-1, block.hidden_size])
        return tf.reshape(dense_2d(gelu(dense_2d(x2d, inner)), outer), tf.shape(x))

    def xla_gelu_ffn(x):
        h = tf.tensordot(x, inner.kernel, [[2], [0]]) + inner.bias
        return outer(xla_gelu(h))

    def xla_bias_gelu_ffn(x):
        x2d = tf.reshape(x, [-1, block.hidden_size])
        h = xla_bias_gelu(tf.matmul(x2d, inner.kernel), tf.convert_to_tensor(inner.bias))
        return tf.reshape(dense_2d(h, outer), tf.shape(x))

    return {"keras": keras_ffn, "matmul2d": matmul2d, "xla_gelu": xla_gelu_ffn,
            "xla_bias_gelu": xla_bias_gelu_ffn}


def train_step(ffn, variables: list):
    """A compiled (no XLA outside the contender's own functions) forward + backward."""
    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ffn(x)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, *variables])
    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="steps per round")
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/ffn_fusion_ab.py")), flush=True)
    tf.random.set_seed(0)
    block = TransformerBlock(hidden_size=384, num_heads=12, intermediate_size=1536)
    x = tf.random.normal([32, 64, 384])
    block.build(x.shape)
    variables = [block.intermediate.kernel, block.intermediate.bias,
                 block.output_dense.kernel, block.output_dense.bias]
    steps = {name: train_step(ffn, variables) for name, ffn in feed_forwards(block).items()}
    reference = [g.numpy() for g in steps["keras"](x)]
    for name, step in steps.items():
        for want, got in zip(reference, step(x)):  # also the trace, before the rounds
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4,
                                       atol=1e-4 * np.abs(want).max(), err_msg=name)

    def runner(step):
        def run():
            for _ in range(args.steps):
                out = step(x)
            out[0].numpy()  # wait for the last step
        return run

    seconds = timing.run_rounds({n: runner(s) for n, s in steps.items()}, args.rounds,
                                log=lambda s: print(s, flush=True))
    for name, values in seconds.items():
        median, low, high = timing.spread([1000 * v / args.steps for v in values])
        print(f"{name:<14} {median:7.2f} ms/step ({low:.2f}-{high:.2f})")
    for name in list(steps)[1:]:
        ratio, low, high = timing.bootstrap_ratio(seconds["keras"], seconds[name])
        print(f"keras / {name} time = {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
