"""Pretraining's input pipeline with tf.data's autotuning and without: its throughput, and
how long deleting a never-ending training iterator takes.

`bert_tf.pretraining_dataset.make_pretraining_dataset` runs without autotuning
(`distribute.without_autotune`); "autotuned" turns it back on for comparison. Each round,
in rotated order, per variant: batches drawn flat out (--batches of them, after a warm-up
batch), then a fresh iterator drawn slowly for --lifetime seconds, as a training step would
draw it, and deleted, the deletion timed. The batches are dynamically masked (80/10/10),
the pipeline's most expensive form.

    python results/benchmark/pretrain_pipeline_autotune.py \
        --train_files 'runs/cpu.data.nsp/part-*' --rounds 4

Prints the provenance header, then per round and variant: examples/s flat out and the
deletion's seconds.
"""

import argparse
import time

import tensorflow as tf

from bert_tf import timing
from bert_tf.dynamic_masking import DynamicMasking
from bert_tf.pretraining_dataset import make_pretraining_dataset

BATCH, SEQ_LENGTH, PREDICTIONS = 64, 128, 20  # the cpu plan's Tiny and Mini
VOCAB_SIZE, MASK_ID, SPECIAL_IDS = 30522, 103, [101, 102, 0]  # bert-base-uncased


def dataset(train_files: str, autotuned: bool) -> tf.data.Dataset:
    masking = DynamicMasking(VOCAB_SIZE, MASK_ID, SPECIAL_IDS, PREDICTIONS, 0.15,
                             (0.8, 0.1, 0.1))
    data = make_pretraining_dataset(train_files, BATCH, SEQ_LENGTH, PREDICTIONS,
                                    is_training=True, seed=1, batch_transform=masking)
    options = tf.data.Options()
    options.autotune.enabled = autotuned
    return data.with_options(options)


def flat_out(data: tf.data.Dataset, batches: int) -> float:
    iterator = iter(data)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * BATCH / (time.perf_counter() - start)


def deletion_after(data: tf.data.Dataset, lifetime: float) -> float:
    iterator = iter(data)
    start = time.perf_counter()
    while time.perf_counter() - start < lifetime:
        next(iterator)
        time.sleep(0.1)
    start = time.perf_counter()
    del iterator
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train_files", required=True, help="records of create_pretraining_data")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--lifetime", type=float, default=15.0)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/pretrain_pipeline_autotune.py")))
    print(f"{'round':>5}  {'variant':<10} {'examples/s':>11} {'delete s':>9}")
    for round_ in range(args.rounds):
        order = (False, True) if round_ % 2 == 0 else (True, False)
        for autotuned in order:
            data = dataset(args.train_files, autotuned)
            rate = flat_out(data, args.batches)
            stall = deletion_after(data, args.lifetime)
            name = "autotuned" if autotuned else "untuned"
            print(f"{round_:>5}  {name:<10} {rate:>11.0f} {stall:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
