"""A/B of the masked LM's cross-entropy: the label's logit from its embedding row (now)
against the one-hot part of the gradient scattered into the [N, V] gradient (before,
commit 57bed09), on BERT-Tiny's compiled pretraining step, in one process, rounds rotated.

  label_logit  `pretraining_model.cross_entropy_and_prediction` as committed: log-sum-exp
               of the logits minus the label's logit, which `MaskedLMHead` computes
  scatter      the same loss with the label's logit gathered from the logits, and a
               gradient softmax * upstream with upstream subtracted at the labels by
               tf.tensor_scatter_nd_sub (which copies the [N, V] gradient first)

Both: `bert_tf.pretrain_benchmark`'s step_alone (`Trainer`'s step: MLM + NSP, AdamW,
clipping, on one batch of the records held in memory), batch 64 x 128, 20 predictions,
float32 (`--precision mixed_bfloat16` for the cpu plan's).

    python results/benchmark/mlm_xent_ab.py --train_files 'RECORDS/part-*' \\
        --vocab_file VOCAB --rounds 8

Prints the provenance header, each contender's median examples/s with its min-max, and
label_logit / scatter with a 95% bootstrap interval over rounds.
"""

import argparse
import tempfile

import tensorflow as tf

from bert_tf import heads, pretrain_benchmark, pretraining_model, timing


@tf.custom_gradient
def _scattered_cross_entropy(logits, labels, predicted):
    """The cross-entropy of commit 57bed09."""
    probs = tf.nn.softmax(logits)
    rows = tf.range(tf.shape(labels)[0])
    at_label, at_max = tf.stack([rows, labels], 1), tf.stack([rows, predicted], 1)
    log_sum_exp = tf.gather_nd(logits, at_max) - tf.math.log(tf.gather_nd(probs, at_max))

    def gradient(upstream):
        return tf.tensor_scatter_nd_sub(probs * upstream[:, None], at_label, upstream), \
            None, None

    return log_sum_exp - tf.gather_nd(logits, at_label), gradient


def scatter_variant():
    """Patches: the head hands the labels through in place of their logits, and the loss
    gathers the label's logit and scatters its gradient."""
    head_call = heads.MaskedLMHead.call

    def call(self, sequence_output, masked_positions, embedding_matrix, labels=None):
        logits = head_call(self, sequence_output, masked_positions, embedding_matrix)
        return logits if labels is None else (logits, tf.cast(labels, tf.int32))

    def cross_entropy_and_prediction(logits, labels):
        labels = tf.cast(labels, tf.int32)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return _scattered_cross_entropy(logits, labels, predicted), predicted

    return {(heads.MaskedLMHead, "call"): call,
            (pretraining_model, "cross_entropy_and_prediction"): cross_entropy_and_prediction}


def pretrain_step(args, model_dir: str, patches: dict):
    """`pretrain_benchmark`'s step on one in-memory batch, traced (its first call) under
    `patches`."""
    originals = {key: getattr(*key) for key in patches}
    for (owner, name), value in patches.items():
        setattr(owner, name, value)
    try:
        _, _, step_alone, _ = pretrain_benchmark.ours(args, args.precision, model_dir)
        step_alone()  # warm-up: the trace, under the patches
    finally:
        for (owner, name), value in originals.items():
            setattr(owner, name, value)
    return step_alone


def parse_args(description: str) -> argparse.Namespace:
    """The command line of the step A/B scripts here (this one, prediction_slots_ab.py,
    fused_adam_ab.py, layer_norm_pretrain_ab.py): the records, the vocabulary, steps per
    round, rounds and precision."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train_files", required=True)
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16"])
    return p.parse_args()


def compare(script: str, description: str, contenders: dict) -> None:
    """Parses the command line, traces each contender's step under its patches and prints
    their rates and first / second with a 95% bootstrap interval over rounds.

    Args:
        contenders: {name: patches} (`pretrain_step`), two of them, in the ratio's order.
    """
    args = parse_args(description)
    # pretrain_benchmark.ours's settings: Tiny, batch 64 x 128, 20 predictions, no XLA.
    args.size, args.batch_size, args.seq_length, args.max_predictions = "tiny", 64, 128, 20
    args.steps_per_execution, args.jit_compile = 1, False
    print("\n".join(timing.header(script)), flush=True)
    with tempfile.TemporaryDirectory() as model_dir:
        steps = {name: pretrain_step(args, f"{model_dir}/{number}", patches)
                 for number, (name, patches) in enumerate(contenders.items())}
        seconds = timing.run_rounds(steps, args.rounds, log=lambda s: print(s, flush=True))
    rates = {name: [64 * args.steps / s for s in values] for name, values in seconds.items()}
    for name, values in rates.items():
        median, low, high = timing.spread(values)
        print(f"{name:<12} {median:7.2f} examples/s ({low:.2f}-{high:.2f})")
    first, second = contenders
    ratio, low, high = timing.bootstrap_ratio(rates[first], rates[second])
    print(f"{first} / {second} examples/s = {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    compare("results/benchmark/mlm_xent_ab.py", __doc__,
            {"label_logit": {}, "scatter": scatter_variant()})
