"""A/B of the dropout's random bits (issue 16, item 4): BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128) with `bert_tf.dropout.Dropout` (a 16-bit draw per element, two per 32-bit word of
the generator) against the same model with Keras's Dropout (a float32 uniform, 32 bits,
per element), in one process, rounds rotated.

    python results/benchmark/dropout_bits_ab.py --precision mixed_bfloat16 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
keras / bits16 time with a 95% bootstrap interval over rounds.
"""

import contextlib
from unittest import mock

import keras

from bert_tf import benchmark, dropout


def keras_dropout():
    """Models built inside use Keras's own dropout (bert_tf.dropout.Dropout's fallback)."""
    return mock.patch.object(dropout.Dropout, "call", keras.layers.Dropout.call)


def main() -> None:
    benchmark.ab_of_ours_cli(__doc__, "results/benchmark/dropout_bits_ab.py",
                             {"keras": keras_dropout, "bits16": contextlib.nullcontext})


if __name__ == "__main__":
    main()
