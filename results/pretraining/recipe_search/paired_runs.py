"""Two pretraining runs at batch 64 that differ in one thing (the seed: initialisation,
dropout, data order; the model size; or a setting, which the labels name): held-out
masked LM side by side at every common evaluation, and the final difference with a
paired bootstrap interval over the held-out sequences (both runs score the same first
2,560 held-out sequences: `heldout_losses.tsv`, one row per sequence).

    python results/pretraining/recipe_search/paired_runs.py \\
        results/pretraining/recipe_search/b64_lr4e-3 results/runs/cpu.pretrain.tiny-nsp/files
"""

import argparse
import csv
import dataclasses
import json
import os

import numpy as np

from bert_tf.pretrain_config import PretrainConfig
from reproduce.statistics import RESAMPLES, resample_indices
from summarize import eval_rows  # this folder's table of the trials


def evaluations(model_dir: str) -> dict:
    """step -> the run's held-out metrics row."""
    return {int(r["step"]): r for r in eval_rows(os.path.join(model_dir, "metrics.csv"))}


def heldout(model_dir: str) -> np.ndarray:
    """[sequences, (loss sum, predictions, correct)] in held-out order."""
    with open(os.path.join(model_dir, "heldout_losses.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return np.array([[float(r["mlm_loss"]), float(r["mlm_count"]), float(r["mlm_correct"])]
                     for r in rows])


# The settings a label names when the two runs differ in them.
LABELLED = ("learning_rate", "dropout", "dynamic_masking", "mask_rates", "adam_beta2",
            "output_bias_init", "num_warmup_steps")
DEFAULTS = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}


def settings(config: dict) -> dict:
    """LABELLED of a pretrain_config.json; older records lack the later flags, whose
    defaults they ran with, and dropout is read from the model they trained."""
    values = {k: config.get(k, DEFAULTS[k]) for k in LABELLED if k != "dropout"}
    if not values["dynamic_masking"]:  # mask_rates is unused: the records hold the masks
        values["mask_rates"] = "as in the records"
    return {**values, "dropout": config["bert_config"]["hidden_dropout_prob"]}


def labels(*model_dirs: str) -> list[str]:
    """Each run's model size and seed, and the settings of LABELLED it differs in, e.g.
    "tiny, seed 0, learning_rate 0.001, dropout 0.0"."""
    configs = []
    for model_dir in model_dirs:
        with open(os.path.join(model_dir, "pretrain_config.json")) as f:
            configs.append(json.load(f))
    runs = [settings(c) for c in configs]
    differ = [k for k in LABELLED if len({json.dumps(r[k]) for r in runs}) > 1]
    return [", ".join([f"{c['model_size']}, seed {c['seed']}"] + [f"{k} {r[k]:g}"
                      if isinstance(r[k], float) else f"{k} {r[k]}" for k in differ])
            for c, r in zip(configs, runs)]


def paired_interval(a: np.ndarray, b: np.ndarray, column: int) -> tuple:
    """b - a of sum(column) / sum(predictions), resampling the same sequences for both
    (reproduce.statistics' bootstrap indices): (value, low, high)."""
    rate = lambda x, i: x[i, column].sum(-1) / x[i, 1].sum(-1)
    sequences = [f"heldout/{i}" for i in range(len(a))]
    diffs = np.concatenate([rate(b, index) - rate(a, index)
                            for index in resample_indices(sequences)])
    value = b[:, column].sum() / b[:, 1].sum() - a[:, column].sum() / a[:, 1].sum()
    return value, *np.percentile(diffs, [2.5, 97.5])


def perplexity(losses: np.ndarray) -> float:
    """exp(loss per prediction) over the held-out sequences."""
    return float(np.exp(losses[:, 0].sum() / losses[:, 1].sum()))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args()
    first, second = evaluations(args.first), evaluations(args.second)
    names = labels(args.first, args.second)
    print(f"| step | sequences | {names[0]}: acc / loss | {names[1]}: acc / loss |")
    print("|---|---|---|---|")
    for step in sorted(set(first) & set(second)):
        cells = [f"{float(r['mlm_accuracy']):.1%} / {float(r['mlm_loss']):.3f}"
                 for r in (first[step], second[step])]
        print(f"| {step} | {step * 64 // 1000}k | {cells[0]} | {cells[1]} |")
    a, b = heldout(args.first), heldout(args.second)
    if len(a) != len(b) or not np.array_equal(a[:, 1], b[:, 1]):
        raise SystemExit("the runs scored different held-out sequences")
    acc = paired_interval(a, b, column=2)
    loss = paired_interval(a, b, column=0)
    print(f"\nFinal, {names[1]} minus {names[0]} over {len(a):,} held-out sequences "
          f"(paired bootstrap, {RESAMPLES:,} resamples, 95%): MLM accuracy "
          f"{acc[0]:+.2%} [{acc[1]:+.2%}, {acc[2]:+.2%}], loss per prediction "
          f"{loss[0]:+.3f} [{loss[1]:+.3f}, {loss[2]:+.3f}]; perplexity: {names[0]} "
          f"{perplexity(a):.0f}, {names[1]} {perplexity(b):.0f}")


if __name__ == "__main__":
    main()
