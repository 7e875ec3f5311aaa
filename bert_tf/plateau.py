"""The unigram plateau: a language model that ignores the context can at best predict
each token with the frequencies of the vocabulary, at a loss equal to their entropy.

Pretraining from scratch reaches that loss within a few hundred steps and may then sit
on it for thousands more ("stuck at ~7"): the model has learned the unigram
distribution and not yet to use the context. A run whose masked-LM loss on the targets
the input hides is still above their unigram entropy after `plateau_check_steps` is
most likely stuck (learning rate too low for the model size, too few steps, broken
inputs), and `pretrain` says so in its log and in eval_results.json.

`--output_bias_init unigram` starts the LM head's output bias at the log frequencies of
the targets (`unigram_log_probs`), the usual "last layer's bias at the base rate", so the
model sits on the plateau at step 0 instead of reaching it through its weights. On
BERT-Tiny that saved the first few hundred steps and did not bring the way off the plateau
any closer (results/pretraining/recipe_search/README.md).

The hidden targets, not all of them: under 80/10/10 masking a model that copies the 10%
of targets left unchanged gets below the entropy over all targets while it still
ignores the context (`pretraining_model.hidden_targets`; BERT-Tiny's cpu run did, from
step ~300 to past 4,500).
"""

import math

import numpy as np
import tensorflow as tf

from bert_tf.pretraining_model import hidden_targets, prediction_targets


def target_counts(batches, objective: str, vocab_size: int) -> np.ndarray:
    """How often each id is a target the LM head is asked for in `batches` and the input
    hides: int64 [vocab_size].

    Args:
        batches: iterable of record batches (`make_pretraining_dataset`, after dynamic
            masking where the run masks dynamically): the masked-LM targets are the
            masked_lm_ids with weight 1 whose position the input does not show
            (`hidden_targets`); for "ltr" every next token.
        objective: the run's objective (`pretraining_instances.OBJECTIVES`).
        vocab_size: the number of ids.
    """
    counts = np.zeros(vocab_size, np.int64)
    for batch in batches:
        positions, labels, weights = prediction_targets(batch, objective)
        hidden = hidden_targets(batch, positions, labels, weights, objective)
        labels = tf.boolean_mask(labels, tf.cast(hidden, tf.bool))
        counts += np.bincount(labels.numpy().astype(np.int64), minlength=vocab_size)
    if counts.sum() == 0:
        raise ValueError("no prediction targets in the records")
    return counts


def unigram_entropy(counts: np.ndarray) -> float:
    """The entropy (nats) of the distribution that `counts` (`target_counts`) sample."""
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def unigram_log_probs(counts: np.ndarray) -> np.ndarray:
    """log p(id) from `counts`, add-one smoothed (ids never seen get ~log 1/N, not -inf):
    float32 [vocab_size], the LM head's output bias that predicts the unigram plateau."""
    return np.log((counts + 1) / (counts.sum() + len(counts))).astype(np.float32)


def plateau_message(step: int, mlm_loss: float, entropy: float) -> str:
    """The log line of a run that has not left the plateau by `step`."""
    return (f"WARNING: step {step}: training masked-LM loss {mlm_loss:.3f} on the targets "
            f"the input hides is still above their unigram entropy ({entropy:.3f} nats, "
            f"perplexity {math.exp(entropy):.0f}): the model predicts token frequencies "
            f"and has not learned to use the context: the run is stuck on the unigram "
            f"plateau. If the loss stopped falling early, the network has likely collapsed "
            f"(every position's output the same vector; on the cpu recipe's BERT-Tiny this "
            f"came from too high a peak learning rate, not too short a warmup): try a lower "
            f"--learning_rate. If it is still falling, more steps may do. Check the records "
            f"too.")
