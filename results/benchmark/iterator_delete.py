"""How long deleting a fine-tuning iterator takes, with tf.data's autotuning and without.

Keras's fit deletes the epoch's iterator when an epoch ends. glue_suite's training batches
(`batching.train_dataset`, 78 batches: RTE's size) are drawn slowly, as a training step
would draw them, for a given lifetime; then the iterator is deleted and the deletion timed.
The pipelines run without autotuning (`batching.without_autotune`); "autotuned" turns it
back on for comparison.

    python results/benchmark/iterator_delete.py --lifetimes 5,20,40,60,90 --rounds 2

Prints the provenance header and, per lifetime, each variant's deletion seconds per round.
"""

import argparse
import time

import numpy as np
import tensorflow as tf

from bert_tf import timing
from glue_suite import batching

NUM_ROWS, MAX_SEQ_LENGTH, BATCH_SIZE = 2490, 128, 32  # RTE's train set, 78 batches


def rte_like_dataset() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 200, NUM_ROWS).clip(max=MAX_SEQ_LENGTH)
    mask = (np.arange(MAX_SEQ_LENGTH) < lengths[:, None]).astype(np.int32)
    inputs = {"input_ids": rng.integers(5, 30000, mask.shape).astype(np.int32) * mask,
              "input_mask": mask, "segment_ids": np.zeros_like(mask)}
    labels = rng.integers(0, 2, NUM_ROWS).astype(np.int32)
    return batching.train_dataset((inputs, labels), BATCH_SIZE, seed=0, length_multiple=16)


def autotuned(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    options.autotune.enabled = True
    return dataset.with_options(options)


def seconds_to_delete(dataset: tf.data.Dataset, lifetime: float) -> float:
    """Draws the whole epoch over `lifetime` seconds, then deletes the iterator."""
    iterator = iter(dataset)
    pause = lifetime / dataset.cardinality().numpy()
    for _ in iterator:
        time.sleep(pause)
    began = time.perf_counter()
    del iterator
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lifetimes", default="5,20,40,60,90",
                   help="comma-separated seconds each iterator lives")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/iterator_delete.py")))
    untuned = rte_like_dataset()
    variants = {"untuned (glue_suite)": untuned, "autotuned": autotuned(untuned)}
    print(f"{'lifetime s':>10}  " + "  ".join(f"{name:>24}" for name in variants))
    for lifetime in (float(x) for x in args.lifetimes.split(",")):
        seconds = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants)[r % 2:] + list(variants)[:r % 2]  # rotated
            for name in names:
                seconds[name].append(seconds_to_delete(variants[name], lifetime))
        print(f"{lifetime:>10g}  " + "  ".join(
            f"{' '.join(f'{s:.2f}' for s in seconds[name]):>24}" for name in variants),
            flush=True)


if __name__ == "__main__":
    main()
