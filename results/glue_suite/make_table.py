"""Rebuilds results/glue_suite/README's table from the runs' metrics.json files alone.

    BERT_DATA_DIR=../shared/data python results/glue_suite/make_table.py
The majority baseline is computed from the dev labels: the majority class's accuracy (and
that constant's F1 / MCC), zero correlation for STS-B, the all-null answer's score for SQuAD
v2.0 (the share of unanswerable questions), zero for other span and entity scores.
"""

import collections
import glob
import json
import os

import numpy as np

from glue_suite.data_dir import resolve_data_dir
from glue_suite.metrics import compute_metrics
from glue_suite.readers import example_labels, read_examples
from glue_suite.tasks import TASKS

HERE = os.path.dirname(os.path.abspath(__file__))


def majority(task, split, data_dir, metrics):
    spec = TASKS[task]
    if task == "squad2.0":  # answer nothing: right on every unanswerable question
        share = 100 * metrics["NoAns_total"] / metrics["total"]
        return f"all-null exact {share:.1f}, f1 {share:.1f}"
    if spec.kind not in ("classification",):
        return "0" if spec.kind != "regression" else "0 (constant)"
    examples, _ = read_examples(task, split, data_dir)
    labels = example_labels(task, examples)
    most_common = collections.Counter(labels.tolist()).most_common(1)[0][0]
    scores = compute_metrics(task, np.full_like(labels, most_common), labels)
    return ", ".join(f"{k} {v:.1f}" for k, v in scores.items() if np.isfinite(v))


def setting(config, group, name):
    """A run's resolved setting: metrics.json nests it in `group` ("train", "features") since
    RunConfig became nested; older records keep every setting at the top level."""
    return config[group][name] if group in config else config[name]


def main():
    data_dir = resolve_data_dir()
    rows = ["| Task | Metric (dev) | Result | Majority baseline | Train examples | Dev examples "
            "| Epochs | LR | Max seq | Wall time |", "|---|---|---|---|---|---|---|---|---|---|"]
    runs = {}  # folder name -> metrics.json
    for path in sorted(glob.glob(os.path.join(HERE, "*", "metrics.json"))):
        with open(path) as f:
            runs[os.path.basename(os.path.dirname(path))] = json.load(f)
    for name, run in runs.items():
        task, config = run["task"], run["config"]
        metrics = ", ".join(f"{k} {v:.2f}" for k, v in run["metrics"].items()
                            if isinstance(v, (int, float)) and not k.endswith("total"))
        label = task if name == task else f"{task} ({name})"
        baseline = majority(task, "dev", data_dir, run["metrics"])
        rows.append(f"| {label} | {run['main_metric']} | {metrics} | {baseline} "
                    f"| {run['train_examples']} ({run['train_task']}) "
                    f"| {run.get('eval_examples', {}).get('dev', '?')} "
                    f"| {setting(config, 'train', 'epochs')} | {run['learning_rate']} "
                    f"| {setting(config, 'features', 'max_seq_length')} "
                    f"| {run['wall_seconds'] / 60:.1f} min |")
    print("\n".join(rows))
    for line in grid_lines(runs):
        print(line)


def grid_lines(runs):
    """One line per learning-rate/seed grid: best on dev, and mean +- std per learning rate."""
    for name, run in runs.items():
        grid = run.get("grid", {})
        if len(grid.get("runs", [])) < 2:
            continue
        key = grid["main_metric"]
        per_lr = "; ".join(f"lr {g['learning_rate']:g}: {g['mean'][key]:.2f} +- "
                           f"{g['std'][key]:.2f} (n={g['runs']})" for g in grid["by_learning_rate"])
        yield (f"\n{name} grid, {key}: best on dev "
               f"{grid['best_value']:.2f} (lr {grid['best_learning_rate']:g}, seed "
               f"{grid['best_seed']}); mean +- std per learning rate: {per_lr}; "
               f"degenerate runs: {len(grid['degenerate_runs'])}")


if __name__ == "__main__":
    main()
