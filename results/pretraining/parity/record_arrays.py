"""A run's pretraining records as one compact .npz, for the reference on a machine without
TensorFlow (a lent GPU, where the whole 15,000-step recipe takes minutes instead of 100).

Only the non-padding tokens are stored (uint16, flat) with each instance's length and the
start of segment B; the masked positions, their targets and the NSP label are stored as
they are. `load` rebuilds the record features with numpy alone, so `hf_reference.py
--arrays` runs where TensorFlow is not installed.

    python results/pretraining/parity/record_arrays.py --pretrain_config RUN/pretrain_config.json \
        --output records.npz [--max_train_instances N] [--seed 0]

The held-out part is exactly what the run evaluates on (its first eval_steps batches, in
order). The training part is every training record, or a random subset of N of them when
the file must stay small (the note of a run on a subset says so).
"""

import argparse
import json
import sys

import numpy as np

_FIELDS = ("lengths", "segment_b_start", "masked_lm_positions", "masked_lm_ids",
           "masked_lm_count", "next_sentence_labels")


def _compact(features: dict) -> dict:
    """Record features [N, T] / [N, P] -> the stored arrays (padding dropped)."""
    mask = features["input_mask"].astype(bool)
    segment_b = features["segment_ids"].astype(bool)
    return {
        "tokens": features["input_ids"][mask].astype(np.uint16),
        "lengths": mask.sum(1).astype(np.uint16),
        # Rows without a segment B (LTR records) get their length: all of it is A.
        "segment_b_start": np.where(segment_b.any(1), segment_b.argmax(1),
                                    mask.sum(1)).astype(np.uint16),
        "masked_lm_positions": features["masked_lm_positions"].astype(np.uint16),
        "masked_lm_ids": features["masked_lm_ids"].astype(np.uint16),
        "masked_lm_count": (features["masked_lm_weights"] > 0).sum(1).astype(np.uint8),
        "next_sentence_labels": features["next_sentence_labels"].reshape(-1).astype(np.uint8),
    }


def _expand(arrays: dict, max_seq_length: int) -> dict:
    """The stored arrays -> record features as make_pretraining_dataset decodes them."""
    lengths = arrays["lengths"].astype(np.int64)
    n, positions = len(lengths), np.arange(max_seq_length)
    input_mask = positions[None, :] < lengths[:, None]
    input_ids = np.zeros((n, max_seq_length), np.int64)
    input_ids[input_mask] = arrays["tokens"]
    segment_ids = input_mask & (positions[None, :] >= arrays["segment_b_start"][:, None])
    predictions = arrays["masked_lm_positions"].shape[1]
    weights = np.arange(predictions)[None, :] < arrays["masked_lm_count"][:, None]
    return {"input_ids": input_ids, "input_mask": input_mask.astype(np.int64),
            "segment_ids": segment_ids.astype(np.int64),
            "masked_lm_positions": arrays["masked_lm_positions"].astype(np.int64),
            "masked_lm_ids": arrays["masked_lm_ids"].astype(np.int64),
            "masked_lm_weights": weights.astype(np.float32),
            "next_sentence_labels": arrays["next_sentence_labels"].astype(np.int64)[:, None]}


def load(path: str) -> tuple:
    """(train features, held-out features, the source's description) from a dump."""
    with np.load(path) as stored:
        meta = json.loads(str(stored["meta"]))
        parts = [{name: stored[f"{split}_{name}"] for name in ("tokens",) + _FIELDS}
                 for split in ("train", "heldout")]
    train, heldout = (_expand(part, meta["max_seq_length"]) for part in parts)
    return train, heldout, meta


def record_batches(config: dict, split: str, training: bool = False, seed: int | None = None):
    """A run's records ("train" or "eval") as numpy batches of its own tf.data pipeline:
    shuffled with `seed` and repeated when training; else in order, once, the held-out
    split cut to the run's eval_steps batches. Imports TensorFlow."""
    from bert_tf.pretraining_dataset import make_pretraining_dataset
    dataset = make_pretraining_dataset(config[f"{split}_files"], config["global_batch_size"],
                                       config["max_seq_length"],
                                       config["max_predictions_per_seq"], is_training=training,
                                       seed=seed)
    if split == "eval" and config.get("eval_steps"):
        dataset = dataset.take(config["eval_steps"])
    for batch in dataset:
        yield {k: v.numpy() for k, v in batch.items()}


def _read_records(config: dict, split: str) -> dict:
    chunks = list(record_batches(config, split))
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def dump(config: dict, output: str, max_train_instances: int | None, seed: int) -> dict:
    heldout = _read_records(config, "eval")
    train = _read_records(config, "train")
    total = len(train["input_ids"])
    if max_train_instances and max_train_instances < total:
        chosen = np.sort(np.random.default_rng(seed).choice(total, max_train_instances,
                                                            replace=False))
        train = {k: v[chosen] for k, v in train.items()}
    meta = {"train_files": config["train_files"], "eval_files": config["eval_files"],
            "train_instances": len(train["input_ids"]), "train_records_total": total,
            "subset_seed": seed if len(train["input_ids"]) < total else None,
            "heldout_instances": len(heldout["input_ids"]),
            "max_seq_length": config["max_seq_length"]}
    stored = {f"{split}_{k}": v for split, features in (("train", train), ("heldout", heldout))
              for k, v in _compact(features).items()}
    np.savez_compressed(output, meta=np.array(json.dumps(meta)), **stored)
    return meta


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pretrain_config", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--max_train_instances", type=int)
    p.add_argument("--seed", type=int, default=0, help="seed of the training subset")
    args = p.parse_args(argv)
    with open(args.pretrain_config, encoding="utf-8") as f:
        config = json.load(f)
    print(json.dumps(dump(config, args.output, args.max_train_instances, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
