"""A rehearsal of a plan: every run exactly as planned, with only its budget capped.

    python -m reproduce.all --scale paper --strategy cpu --rehearse

runs each command of the paper plan (the same CLIs, flags and model sizes: BERT-Large,
phase 2 at 512 tokens, the feature-based NER) for a few steps on a few examples, so that
a bug shows here in minutes rather than hours into a paid TPU. `rehearse` is the one
place the caps are applied; every capped run carries {flag: (planned, capped)}, which
its record keeps as record["rehearsal"]. Outputs go under runs/rehearsal/ (`OUTPUT_DIR`,
`WORK_DIR`), never beside real results.

Why these caps (measured on the 2-core CPU machine, float32): one process costs 10-30 s
before its first step (TensorFlow import, model build, checkpoint load), so the plan's
~116 runs cost ~30-40 minutes in start-up alone; the caps keep the work after it to
seconds. A BERT-Large step at 512 tokens and batch 2 takes ~20 s; a BERT-Large MRPC
fine-tuning of 4 examples took 72 s: 4 start-up, 7 model build, 32 tracing (the first
step), 23 the second step, 5 evaluation. Two runs go at once (`JOBS`), pretraining alone.
  data      first file of each corpus glob, its first 20 kB (both text formats are read),
            one worker (the shards do not depend on the number of workers).
  pretrain  6 steps of batch 2: the fewest with a phase-2 step (round(6 x 0.1) = 1) and
            four distinct Figure 5 exports (scaled: 200k/1M x 6 -> 1, 2, 4, 5); one
            checkpoint (at the end), one evaluation batch.
  finetune  the first learning rate of the grid x 1 seed, 1 epoch of 2 examples at batch
            2 (one step: the first step, which traces, is most of a short run's time), 2
            examples of each dev split, no test-set predictions (a full test set is
            minutes of Base forward passes on this CPU).
"""

import dataclasses
import os
import shutil
from typing import Optional

from glue_suite.tasks import get_task
from reproduce import cost_model
from reproduce.commands import DataCommand, FinetuneCommand, PretrainCommand
from reproduce.plan import Plan, Run

OUTPUT_DIR = os.path.join("runs", "rehearsal", "results")
WORK_DIR = os.path.join("runs", "rehearsal", "work")
JOBS = 2  # runs at once (`runner.run_plan`): start-up and tracing use one core each

DATA_CAPS = dict(max_files_per_pattern=1, max_bytes_per_file=20_000, num_workers=1)
PRETRAIN_STEPS = 6
PRETRAIN_CAPS = dict(global_batch_size=2, num_warmup_steps=1, eval_steps=1, log_every=1)
FINETUNE_CAPS = dict(seeds=1, epochs=1, batch_size=2, max_train_examples=2,
                     max_eval_examples=2, no_test_predictions=True)


def _capped_steps(config: PretrainCommand) -> dict:
    """The step counts of a pretraining run scaled to PRETRAIN_STEPS: checkpoint and
    evaluate once, at the end; each Figure 5 export at the same fraction of the run."""
    steps = PRETRAIN_STEPS
    exports = tuple(sorted({max(1, min(steps - 1, round(s * steps / config.num_train_steps)))
                            for s in config.export_steps}))
    if len(exports) != len(config.export_steps):
        raise ValueError(f"{len(config.export_steps)} export steps do not fit in {steps} "
                         f"steps: raise PRETRAIN_STEPS")
    return dict(num_train_steps=steps, save_checkpoints_steps=steps, eval_every=steps,
                export_steps=exports)


def _caps(run: Run, exports: dict) -> dict:
    """The capped fields of `run`'s typed command; `exports`: planned export dir -> the
    rehearsal's (a Figure 5 fine-tuning reads the export at the scaled step)."""
    config = run.config
    if isinstance(config, DataCommand):
        return DATA_CAPS
    if isinstance(config, PretrainCommand):
        return {**PRETRAIN_CAPS, **_capped_steps(config)}
    if isinstance(config, FinetuneCommand):
        grid = cost_model.searched_learning_rates(config, run.info["model"].get("size"))
        checkpoint = exports.get(config.init_checkpoint, config.init_checkpoint)
        return {**FINETUNE_CAPS, "learning_rates": grid[:1], "init_checkpoint": checkpoint}
    raise TypeError(f"cannot rehearse {type(config).__name__}")


def _renamed_exports(planned: PretrainCommand, capped: PretrainCommand) -> dict:
    return {os.path.join(planned.model_dir, f"export_{a}"):
            os.path.join(capped.model_dir, f"export_{b}")
            for a, b in zip(planned.export_steps, capped.export_steps)}


def rehearse(run: Run, exports: Optional[dict] = None) -> Run:
    """`run` with its budget capped: the same CLI and flags, fewer steps and examples.
    `exports`: the export dirs that capped pretraining runs renamed (`rehearse_plan`)."""
    if run.config is None:
        raise ValueError(f"{run.run_id}: no typed command to cap")
    caps = {k: v for k, v in _caps(run, exports or {}).items()
            if getattr(run.config, k) != v}
    capped = dataclasses.replace(run.config, **caps)
    changes = {k: (getattr(run.config, k), getattr(capped, k)) for k in caps}
    return dataclasses.replace(run, args=capped.argv(), config=capped, rehearsal=changes,
                               estimate_s=_estimate(run, capped))


def _estimate(run: Run, capped) -> Optional[float]:
    if run.stage == "data":
        return cost_model.DATA_STARTUP_S
    if run.stage == "pretrain":
        return cost_model.pretrain_seconds(capped)
    info = run.info
    return cost_model.finetune_seconds(capped, info["model"].get("size"),
                                       get_task(info["task"]).sizes, info["bilstm_units"])


def rehearse_plan(plan: Plan) -> Plan:
    """Every run of `plan` capped (`rehearse`), dependencies first."""
    runs, exports = {}, {}
    for run_id, run in plan.runs.items():
        runs[run_id] = rehearse(run, exports)
        if run.stage == "pretrain":
            exports.update(_renamed_exports(run.config, runs[run_id].config))
    return dataclasses.replace(plan, runs=runs)


def clean_up(work_dir: str, done: bool, keep: bool) -> None:
    """Reports the size of a rehearsal's work dir (checkpoints of BERT-Large and more)
    and deletes it once every run finished, unless `keep`: a rerun needs it otherwise."""
    if "://" in work_dir or not os.path.isdir(work_dir):
        return
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(work_dir)
               for f in names if not os.path.islink(os.path.join(d, f)))
    delete = done and not keep
    print(f"Rehearsal work dir {work_dir}: {size / 2**30:.1f} GiB"
          f"{'; deleted' if delete else '; kept'}.")
    if delete:
        shutil.rmtree(work_dir)
