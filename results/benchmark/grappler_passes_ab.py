"""glue_suite.run end to end under four grappler settings: TensorFlow's default, the
meta-optimizer off, and every pass off but the remapper (which fuses oneDNN kernels), with
and without function inlining, with glue_suite.benchmark's settings (2,000 examples, 1
epoch, lr 1e-4, batch 32). Each run a fresh process, the order rotated every round;
prints each run's stages (metrics.json "timings") and each variant's median.

    BERT_DATA_DIR=../shared/data python results/benchmark/grappler_passes_ab.py \
        --task cola --rounds 3

The question: can the first step's excess ("trace") be cut without the slower steps that
turning the whole meta-optimizer off costs (this README, "grappler off")?
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bert_tf import timing
from bert_tf.checkpoints import default_checkpoint
from glue_suite import benchmark

_OFF = ("constant_folding", "shape_optimization", "arithmetic_optimization",
        "dependency_optimization", "loop_optimization", "function_optimization",
        "debug_stripper", "pin_to_host_optimization", "implementation_selector",
        "layout_optimizer", "scoped_allocator_optimization")
VARIANTS = {
    "default": {},
    "meta_off": {"disable_meta_optimizer": True},
    "remapper_only": {**{k: False for k in _OFF}, "disable_model_pruning": True},
    "remapper+inlining": {**{k: False for k in _OFF if k != "function_optimization"},
                          "disable_model_pruning": True},
}
STAGES = ("trace", "train_steps", "evaluate", "total")


def run(variant: str, settings, output_dir: str) -> dict:
    """One glue_suite.run with glue_suite.benchmark's settings under `variant`: its timings
    and dev metrics."""
    command = benchmark.glue_suite_argv(settings, default_checkpoint(), output_dir, None)
    argv = command[3:]  # after "python -m glue_suite.run"
    code = ("import tensorflow as tf; tf.config.optimizer.set_experimental_options("
            f"{VARIANTS[variant]!r}); from glue_suite import run; run.main({argv!r})")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    with open(os.path.join(output_dir, "metrics.json")) as f:
        metrics = json.load(f)
    return {**metrics["timings"], "metrics": metrics["metrics"]}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="cola")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/grappler_passes_ab.py")), flush=True)
    settings = benchmark.build_parser().parse_args(["--task", args.task])
    names, results = list(VARIANTS), {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            for name in timing.rotated(names, r):
                t = run(name, settings, os.path.join(workdir, f"{name}-{r}"))
                results[name].append(t)
                print(f"round {r + 1}/{args.rounds} {name:18s} "
                      + " ".join(f"{s} {t[s]:6.2f}" for s in STAGES)
                      + f" dev {t['metrics']}", flush=True)
    print("median seconds:")
    for name in names:
        print(f"  {name:18s} " + " ".join(
            f"{s} {statistics.median(t[s] for t in results[name]):6.2f}" for s in STAGES))


if __name__ == "__main__":
    main()
