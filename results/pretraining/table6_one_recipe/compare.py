"""Table 6 at one recipe: BERT-Mini (the cpu plan's run) against BERT-Tiny pretrained with
Mini's recipe (this folder's run), on the same records, batches, schedule and seed, so
that the model size is the only difference, as in the paper's Table 6. The cpu plan then
gave each size 100 minutes instead (Tiny 960k sequences, Mini 269k); since 2026-11-28 it
pretrains every size with this recipe itself.

    BERT_DATA_DIR=../shared/data python results/pretraining/table6_one_recipe/compare.py

prints, for Mini minus Tiny: held-out masked-LM perplexity, and dev MNLI-m, MRPC and
SST-2 accuracy (3 restarts each), each with the findings' 95% bootstrap interval
(`reproduce.statistics`: held-out sequences resampled in pairs; dev examples, the same
for both models, and each model's restarts, drawn with replacement). Mini's numbers are
read from its plan records (`results/runs/cpu.*.mini-nsp*`), Tiny's from this folder, which
`--collect runs/table6` fills from the commands of `run.sh`.
"""

import argparse
import glob
import json
import os
import shutil

from glue_suite import predictions
from reproduce import runner, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
PLAN_RECORDS = os.path.join(HERE, "..", "..")  # results/: its runs/ holds the plan's records
MINI_PRETRAIN = "cpu.pretrain.mini-nsp"
TINY_PRETRAIN = "tiny_mini_recipe"
CELLS = {"mnli": "accuracy", "mrpc": "accuracy", "sst2": "accuracy"}  # Table 6's columns
PRETRAIN_FILES = ("metrics.csv", "pretrain_config.json", "eval_results.json",
                  statistics.HELDOUT_LOSSES)
GOLD_DIGESTS = "gold_sha256.json"


def collect(runs_dir: str) -> None:
    """Copies run.sh's outputs here: the pretraining's records, each fine-tuning's metrics
    and per-restart dev predictions, and the digest of the gold they were scored on (the
    gold itself, the benchmark's labels, stays out, as in the plan's records)."""
    target = os.path.join(HERE, TINY_PRETRAIN)
    os.makedirs(target, exist_ok=True)
    for name in PRETRAIN_FILES:
        shutil.copy(os.path.join(runs_dir, TINY_PRETRAIN, name), target)
    for task in CELLS:
        source, target = (os.path.join(d, f"finetune.{task}") for d in (runs_dir, HERE))
        paths = [os.path.join(source, "metrics.json"),
                 *glob.glob(os.path.join(source, predictions.RESTARTS, "lr*", "*"))]
        for path in paths:
            copy = os.path.join(target, os.path.relpath(path, source))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            shutil.copy(path, copy)
        with open(os.path.join(target, GOLD_DIGESTS), "w") as f:
            json.dump(runner.gold_digests(source, task), f, indent=1)


def _record(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def mini_estimates(data_dir: str) -> dict:
    """{cell: Estimate} of Mini's plan records."""
    out = {}
    pretrain = _record(os.path.join(PLAN_RECORDS, "runs", MINI_PRETRAIN, "record.json"))
    out["perplexity"] = statistics.estimate(pretrain, "mlm_perplexity", PLAN_RECORDS)
    for task, metric in CELLS.items():
        record = _record(os.path.join(PLAN_RECORDS, "runs", f"cpu.finetune.mini-nsp.{task}",
                                      "record.json"))
        out[task] = statistics.estimate(record, metric, PLAN_RECORDS, data_dir)
    return out


def tiny_estimates(data_dir: str) -> dict:
    """{cell: Estimate} of this folder's Tiny: its outputs read as a plan record would be."""
    files_dir = os.path.join(HERE, TINY_PRETRAIN)
    results = _record(os.path.join(files_dir, "eval_results.json"))
    config = _record(os.path.join(files_dir, "pretrain_config.json"))
    pretrain = {"stage": "pretrain", "metrics": results,
                "argv": ["--eval_files", config["eval_files"]]}
    out = {"perplexity": statistics.files_estimate(pretrain, "mlm_perplexity", files_dir)}
    for task, metric in CELLS.items():
        files_dir = os.path.join(HERE, f"finetune.{task}")
        result = _record(os.path.join(files_dir, "metrics.json"))
        record = {"run_id": f"table6_one_recipe.finetune.{task}", "stage": "finetune",
                  "result": result, "metrics": result["metrics"],
                  "outputs": {"gold_sha256": _record(os.path.join(files_dir, GOLD_DIGESTS))}}
        out[task] = statistics.files_estimate(record, metric, files_dir, data_dir)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collect", metavar="RUNS_DIR",
                   help="first copy run.sh's outputs from RUNS_DIR (runs/table6) here")
    p.add_argument("--data_dir", default=os.environ.get("BERT_DATA_DIR"),
                   help="where the dev sets' gold labels are read (default $BERT_DATA_DIR)")
    args = p.parse_args()
    if args.collect:
        collect(args.collect)
    mini, tiny = mini_estimates(args.data_dir), tiny_estimates(args.data_dir)
    print("| cell | Mini (L4/H256) | Tiny (L2/H128), Mini's recipe | Mini - Tiny [95% CI] |")
    print("|---|---|---|---|")
    for cell in ("perplexity", *CELLS):
        difference = statistics.difference(mini[cell], tiny[cell])
        low, high = difference.interval()
        name = "held-out MLM perplexity" if cell == "perplexity" else f"{cell} accuracy"
        print(f"| {name} | {mini[cell].value:.2f} | {tiny[cell].value:.2f} | "
              f"{difference.value:+.2f} [{low:+.2f}, {high:+.2f}] |")


if __name__ == "__main__":
    main()
