"""Two runs of the chosen recipe that differ only in their seed (initialisation, dropout,
data order): held-out masked LM side by side at every common evaluation, and the final
difference with a paired bootstrap interval over the held-out sequences (both runs score
the same first 2,560 held-out sequences: `heldout_losses.tsv`, one row per sequence).

    python results/pretraining/recipe_search/seeds.py \\
        results/pretraining/recipe_search/b64_lr4e-3 results/runs/cpu.pretrain.tiny-nsp/files
"""

import argparse
import csv
import json
import os

import numpy as np

RESAMPLES = 10_000


def eval_rows(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "metrics.csv")) as f:
        return {int(r["step"]): r for r in csv.DictReader(f) if r["split"] == "eval"}


def heldout(model_dir: str) -> np.ndarray:
    """[sequences, (loss sum, predictions, correct)] in held-out order."""
    with open(os.path.join(model_dir, "heldout_losses.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return np.array([[float(r["mlm_loss"]), float(r["mlm_count"]), float(r["mlm_correct"])]
                     for r in rows])


def seed_of(model_dir: str) -> int:
    with open(os.path.join(model_dir, "pretrain_config.json")) as f:
        return json.load(f)["seed"]


def paired_interval(a: np.ndarray, b: np.ndarray, column: int, seed: int = 0) -> tuple:
    """b - a of sum(column) / sum(predictions), resampling sequences: (value, low, high)."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(a), size=(RESAMPLES, len(a)))
    rate = lambda x, i: x[i, column].sum(-1) / x[i, 1].sum(-1)
    diffs = rate(b, index) - rate(a, index)
    value = b[:, column].sum() / b[:, 1].sum() - a[:, column].sum() / a[:, 1].sum()
    return value, *np.percentile(diffs, [2.5, 97.5])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args()
    first, second = eval_rows(args.first), eval_rows(args.second)
    names = [f"seed {seed_of(d)}" for d in (args.first, args.second)]
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
          f"{loss[0]:+.3f} [{loss[1]:+.3f}, {loss[2]:+.3f}]")


if __name__ == "__main__":
    main()
