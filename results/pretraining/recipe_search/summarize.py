"""The recipe search's table: where each trial's held-out masked LM stood after the same
number of training sequences (and roughly the same minutes), from its metrics.csv.

    python results/pretraining/recipe_search/summarize.py runs/recipe/*/metrics.csv \\
        --sequences 20000,40000,60000,80000 > results/pretraining/recipe_search/table.md

A trial is compared at the last evaluation at or before each count (its batch size sets
where its evaluations fall). Minutes are the trial's own elapsed time at that evaluation:
trials that shared the machine with other work ran slower, so sequences are the fair axis
(training throughput is the same at every batch size here, within a few percent).
"""

import argparse
import csv
import json
import os


def trial_settings(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "pretrain_config.json")) as f:
        config = json.load(f)
    return {k: config[k] for k in ("model_size", "global_batch_size", "learning_rate",
                                   "num_warmup_steps", "num_train_steps", "max_seq_length",
                                   "precision")}


def eval_rows(metrics_csv: str) -> list:
    with open(metrics_csv) as f:
        return [r for r in csv.DictReader(f) if r["split"] == "eval"]


def at_sequences(rows: list, batch: int, sequences: int):
    """The last evaluation at or before `sequences` training sequences, or None."""
    before = [r for r in rows if int(r["step"]) * batch <= sequences]
    return before[-1] if before else None


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", nargs="+", help="the trials' metrics.csv files")
    p.add_argument("--sequences", required=True, help="comma-separated sequence counts")
    args = p.parse_args()
    counts = [int(c) for c in args.sequences.split(",")]
    header = ["trial", "batch", "lr", "warmup", "seq", "steps planned"] + [
        f"{c // 1000}k seqs: acc / loss (min)" for c in counts]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for path in args.metrics:
        model_dir = os.path.dirname(path)
        s, rows = trial_settings(model_dir), eval_rows(path)
        cells = []
        for count in counts:
            row = at_sequences(rows, s["global_batch_size"], count)
            cells.append("–" if row is None or int(row["step"]) * s["global_batch_size"] < 0.8 * count
                         else f"{100 * float(row['mlm_accuracy']):.1f}% / "
                              f"{float(row['mlm_loss']):.2f} ({float(row['elapsed_seconds']) / 60:.0f})")
        print("| " + " | ".join([os.path.basename(model_dir), str(s["global_batch_size"]),
                                 f"{s['learning_rate']:g}", str(s["num_warmup_steps"]),
                                 str(s["max_seq_length"]), str(s["num_train_steps"])] + cells)
              + " |")


if __name__ == "__main__":
    main()
