"""The cost model's fine-tuning rates, fitted to what the plan's runs took: the figures
behind `reproduce.cost_model.CPU_FINETUNE`.

    python -m reproduce.calibration --cpu_isa "AVX-512 BF16"

A fine-tuning step costs a fixed part (the optimizer's update of every weight, the
30,522-row embedding table included, and the step's dispatch) plus its FLOPs at the
model's rate. For each model, a least-squares line through its runs' seconds per step
(glue_suite's metrics.json "train_steps" timing over the run's steps) against their
training FLOPs per step (at each task's bucketed length, `cost_model.BUCKETED_TOKENS`)
gives both; runs of different tasks, hence lengths, tell them apart. Only runs on CPUs
of one instruction set are fitted together. Each run's fitted step is printed beside
its own, so a poor fit shows.
"""

import argparse
import math
from typing import NamedTuple, Optional

import numpy as np

from bert_tf import timing
from bert_tf.cli import run_main
from reproduce.cost_model import BUCKETED_TOKENS, encoder_flops
from reproduce.records import load_records


class TimedRun(NamedTuple):
    run_id: str
    size: Optional[str]  # None: the shipped checkpoint
    steps: int
    flops_per_step: float  # training FLOPs of one step's batch
    seconds: float  # of the training steps alone


def timed_runs(output_dir: str, cpu_isa: str) -> list[TimedRun]:
    """The finished fine-tuning runs on `cpu_isa` whose steps are the encoder's alone
    (no BiLSTM head, not feature-based), with the training timing glue_suite recorded."""
    found = []
    for record in load_records(output_dir):
        info = record.get("info") or {}
        if (record["stage"] != "finetune" or record.get("status") != "finished"
                or info.get("head") or info.get("feature_mode")
                or (record.get("hardware") or {}).get("cpu_isa") != cpu_isa):
            continue
        metrics = record["result"]  # the run's metrics.json, as the runner recorded it
        seconds = (metrics.get("timings") or {}).get("train_steps")
        train = metrics["config"]["train"]
        if not seconds or info["train_task"] not in BUCKETED_TOKENS:
            continue
        size = info["model"].get("size")
        restarts = len(metrics["grid"]["runs"])  # every (learning rate, seed) trained
        steps = restarts * train["epochs"] * math.ceil(metrics["train_features"]
                                                       / train["batch_size"])
        flops = train["batch_size"] * encoder_flops(size, BUCKETED_TOKENS[info["train_task"]])
        found.append(TimedRun(record["run_id"], size, steps, flops, seconds))
    return found


def fit(runs: list[TimedRun]) -> tuple[float, float]:
    """(fixed seconds per step, GFLOP/s) of the line through the runs' seconds per step."""
    design = np.array([[1.0, r.flops_per_step / 1e9] for r in runs])
    per_step = np.array([r.seconds / r.steps for r in runs])
    (fixed, seconds_per_gflop), *_ = np.linalg.lstsq(design, per_step, rcond=None)
    return float(fixed), float(1 / seconds_per_gflop)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", default="results", help="where runs/*/record.json are")
    p.add_argument("--cpu_isa", default="AVX-512 BF16",
                   help="fit the runs of CPUs with this instruction set (records' "
                        "hardware.cpu_isa)")
    args = p.parse_args(argv)
    print("\n".join(timing.header("reproduce.calibration")))
    runs = timed_runs(args.output_dir, args.cpu_isa)
    for size in sorted({r.size for r in runs}, key=str):
        own = [r for r in runs if r.size == size]
        if len({r.flops_per_step for r in own}) < 2:
            print(f"{size or 'default'}: one length only ({own[0].run_id}), no fit")
            continue
        fixed, gflops = fit(own)
        print(f"{size or 'default'}: {fixed * 1e3:.1f} ms a step + its FLOPs at "
              f"{gflops:.0f} GFLOP/s ({len(own)} runs)")
        for r in own:
            fitted = fixed + r.flops_per_step / (gflops * 1e9)
            print(f"    {r.run_id:52s} {r.steps:6d} steps of {r.flops_per_step / 1e9:6.1f} "
                  f"GFLOP: {r.seconds / r.steps * 1e3:7.1f} ms, fitted {fitted * 1e3:7.1f}")


if __name__ == "__main__":
    run_main(main)
