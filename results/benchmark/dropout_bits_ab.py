"""A/B of the dropout's random bits (issue 16, item 4): BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128) with `bert_tf.dropout.Dropout` (a 16-bit draw per element, two per 32-bit word of
the generator) against the same model with Keras's Dropout (a float32 uniform, 32 bits,
per element), in one process, rounds rotated.

    python results/benchmark/dropout_bits_ab.py --precision mixed_bfloat16 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
keras / bits16 time with a 95% bootstrap interval over rounds.
"""

import argparse
import contextlib
from unittest import mock

import keras

from bert_tf import benchmark, dropout, timing
from bert_tf.config import BertConfig


@contextlib.contextmanager
def keras_dropout():
    """Models built inside use Keras's own dropout (bert_tf.dropout.Dropout's fallback)."""
    with mock.patch.object(dropout.Dropout, "call", keras.layers.Dropout.call):
        yield


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=1, help="steps per round")
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/dropout_bits_ab.py")), flush=True)
    config = BertConfig()
    batch = benchmark.random_batch(config, 32, 128)
    with keras_dropout():  # traced (built and warmed up) with Keras's dropout
        keras_peer = benchmark.ours(config, batch, "train", args.precision, False)
        keras_peer.step()
    bits16_peer = benchmark.ours(config, batch, "train", args.precision, False)
    bits16_peer.step()

    def runner(peer):
        def run():
            for _ in range(args.steps):
                peer.step()  # returns the loss as numpy: the step has finished
        return run

    seconds = timing.run_rounds({"keras": runner(keras_peer), "bits16": runner(bits16_peer)},
                                args.rounds, log=lambda s: print(s, flush=True))
    for name, values in seconds.items():
        median, low, high = timing.spread([v / args.steps for v in values])
        print(f"{name:<7} {median:6.3f} s/step ({low:.3f}-{high:.3f})")
    ratio, low, high = timing.bootstrap_ratio(seconds["keras"], seconds["bits16"])
    print(f"{args.precision}: keras / bits16 time = {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
