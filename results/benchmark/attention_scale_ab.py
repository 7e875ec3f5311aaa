"""A/B of where attention scales its scores (issue 16, item 4): BERT-Base's train step of
`bert_tf.benchmark` ("ours": encoder + classification head, AdamW, dropout 0.1, batch
32 x 128) with the scores divided by sqrt(D) after QK^T (over [B, A, T, T] in float32)
against the queries multiplied by 1 / sqrt(D) before it (over [B, A, T, D], half the
elements at T = 128, D = 64; exact in any precision where 1 / sqrt(D) is a power of 2,
as for every BERT size but MiniLM's D = 32), and, for information, the whole softmax in
the compute dtype (bfloat16 under mixed_bfloat16, as Keras's MultiHeadAttention does),
in one process, rounds rotated.

    python results/benchmark/attention_scale_ab.py --precision mixed_bfloat16 --rounds 8

Prints the provenance header, each contender's median seconds per step with min-max, and
the first variant's time over each other's with a 95% bootstrap interval.
"""

import contextlib
import math
from unittest import mock

from keras import ops

from bert_tf import benchmark
from bert_tf.attention import SelfAttention


def _call(scale_queries: bool, float32_softmax: bool):
    def call(self, x, mask, training=None):
        batch, seq_length = ops.shape(x)[0], ops.shape(x)[1]

        def split_heads(t):
            t = ops.reshape(t, (batch, seq_length, self.num_heads, self.head_size))
            return ops.transpose(t, (0, 2, 1, 3))

        q = self.query(x)
        if scale_queries:
            q = q * ops.cast(1 / math.sqrt(self.head_size), q.dtype)
        q, k, v = split_heads(q), split_heads(self.key(x)), split_heads(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        if float32_softmax:
            scores = ops.cast(scores, "float32")
        if not scale_queries:
            scores = scores / math.sqrt(self.head_size)
        scores = ops.where(mask[:, None], scores, ops.cast(-1e9, scores.dtype))
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout_layer(probs, training=training)
        context = ops.matmul(probs, v)
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)),
                              (batch, seq_length, self.num_heads * self.head_size))
        return self.output_dense(context)
    return call


def variant(scale_queries: bool, float32_softmax: bool = True):
    return lambda: mock.patch.object(SelfAttention, "call", _call(scale_queries, float32_softmax))


def main() -> None:
    benchmark.ab_of_ours_cli(__doc__, "results/benchmark/attention_scale_ab.py",
                             {"scores_scaled": contextlib.nullcontext,
                              "queries_scaled": variant(True),
                              "queries_scaled_softmax_in_compute_dtype": variant(True, False)})


if __name__ == "__main__":
    main()
