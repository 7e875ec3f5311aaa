"""Tokens a fine-tuning example costs under glue_suite's length-bucketed batches: the
figures behind `reproduce.cost_model.BUCKETED_TOKENS`.

    BERT_DATA_DIR=../shared/data python -m reproduce.bucketed_tokens \
        --tasks cola,sst2,stsb,mrpc,rte,wnli,mnli,squad1.1,conll2003

A batch costs its rows times its longest row (glue_suite.batching cuts each batch there),
so a task's cost per example is the mean, over one epoch's batches weighted by their rows,
of each batch's longest row. The epoch is drawn as glue_suite.batching.train_dataset draws
it (shuffled rows, chunks of CHUNK_BATCHES batches sorted by length), from each task's
training split featurized with the uncased vocabulary at its default max_seq_length.
"""

import argparse
import os

import numpy as np

from bert_tf import timing
from bert_tf.tokenization import BertTokenizer
from glue_suite import features as feats
from glue_suite import readers
from glue_suite.batching import CHUNK_BATCHES, row_lengths
from glue_suite.run import subsample
from glue_suite.tasks import get_task

UNCASED_VOCAB = "bert_vocab/bert-base-uncased/vocab.txt"


def epoch_tokens_per_row(lengths: np.ndarray, batch_size: int, seed: int = 0) -> float:
    """Mean padded length per row of one bucketed epoch (batches cut to their longest)."""
    rows = np.random.default_rng(seed).permutation(lengths)
    chunk = batch_size * CHUNK_BATCHES
    padded = 0
    for start in range(0, len(rows), chunk):
        ordered = np.sort(rows[start:start + chunk])
        for b in range(0, len(ordered), batch_size):
            batch = ordered[b:b + batch_size]
            padded += batch.max() * len(batch)
    return padded / len(rows)


def task_lengths(task: str, data_dir: str, tokenizer: BertTokenizer,
                 max_examples: int) -> np.ndarray:
    """Real tokens of each training feature of `task` (of at most `max_examples`
    examples, drawn as glue_suite.run's --max_train_examples draws them)."""
    spec = get_task(task)
    examples, _ = readers.read_file(task, "train", readers.data_path(task, "train", data_dir))
    examples = subsample(examples, max_examples, spec.kind)
    settings = feats.FeatureSettings.for_task(spec.hparams)
    features = feats.convert_examples(task, examples, tokenizer, settings, labelled=True,
                                      training=True)
    return row_lengths(features["input_mask"])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", required=True, help="comma-separated glue_suite tasks")
    p.add_argument("--data_dir", default=os.environ.get("BERT_DATA_DIR"))
    p.add_argument("--max_examples", type=int, default=10_000,
                   help="featurize at most this many training examples of a task")
    args = p.parse_args(argv)
    tokenizer = BertTokenizer(os.path.join(args.data_dir, UNCASED_VOCAB), lower_case=True)
    print("\n".join(timing.header("reproduce.bucketed_tokens")))
    print(f"{'task':<10} {'features':>8} {'mean real':>9} {'mean padded':>11} {'T':>4}")
    for task in args.tasks.split(","):
        spec = get_task(task)
        lengths = task_lengths(task, args.data_dir, tokenizer, args.max_examples)
        padded = epoch_tokens_per_row(lengths, spec.hparams.batch_size)
        print(f"{task:<10} {len(lengths):>8} {lengths.mean():>9.1f} {padded:>11.1f} "
              f"{spec.hparams.max_seq_length:>4}")


if __name__ == "__main__":
    main()
