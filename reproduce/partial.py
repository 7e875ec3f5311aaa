"""A fine-tuning run's finished restarts, kept beside its record before the run ends.

A run's grid of restarts resumes where it stopped (glue_suite.grid_progress), but only
where its work dir is. On a machine much slower than the plan's (`reproduce.units`'
speed note) one run can outgrow a sitting: SQuAD v1.1's 3 restarts on 10k questions take
~6 hours on a slow AVX2 host. So while a fine-tuning run goes, the runner copies each
restart it finishes next to the record, which is committed:

    results/runs/<run_id>/partial/
        partial.json                   the run's argv and needs_ended, and per restart
                                       the commit, machine and time that finished it
        restarts/lr<lr>-seed<seed>/    its point.json and dev predictions, as
                                       grid_progress keeps them

and when the run starts where its grid_progress/ lacks them (another machine), it adds
them there (`glue_suite.grid_progress.GridProgress.add`, under the identity the run
computes here: the plan vouches for them, as it does for a finished run's record: same
command, same runs read), so that only the missing restarts are trained. The finished
record names the restarts made in earlier sittings (`adopted_restarts`), and the
directory goes.

A pretraining run stopped part-way resumes from its last checkpoint, which stays in the
work dir: on the machine that made it, the plan counts those steps as done
(`pretraining_shares_done`), so that `--units` sees what is left of its unit there.
"""

import os
import shutil
import sys
import time
from typing import Optional

from bert_tf import files
from bert_tf.checkpoint_steps import default_checkpoint_dir, latest_checkpoint_step
from bert_tf.cli import InputError
from reproduce.commands import FinetuneCommand
from reproduce.cost_model import grid_size
from reproduce.plan import Plan, Run
from reproduce.records import now, record_path, same_command_as

PARTIAL = "partial"
INDEX = "partial.json"


def directory(record_dir: str) -> str:
    return os.path.join(record_dir, PARTIAL)


def read(record_dir: str) -> Optional[dict]:
    path = os.path.join(directory(record_dir), INDEX)
    return files.read_json(path) if os.path.exists(path) else None


def belongs(partial: dict, record: dict) -> bool:
    """Whether kept restarts were made by the run `record` starts: same command, same
    runs read (each the run with the same end time)."""
    return all(partial.get(k) == record.get(k) for k in ("module", "argv", "needs_ended"))


def save(run: Run, record_dir: str, record: dict) -> list[str]:
    """Copies the restarts the run has finished and partial/ lacks; returns their
    names. `record`: the run's record as it started, as written (portable paths), with
    its argv, needs_ended, git and hardware."""
    from glue_suite.grid_progress import finished_point_dirs  # TensorFlow: only here
    partial = read(record_dir)
    if partial is None or not belongs(partial, record):
        partial = {k: record.get(k) for k in ("module", "argv", "needs_ended")}
        partial["restarts"] = {}
        shutil.rmtree(directory(record_dir), ignore_errors=True)
    saved = []
    for source in finished_point_dirs(run.out_dir):
        name = os.path.basename(source)
        if name in partial["restarts"]:
            continue
        target = os.path.join(directory(record_dir), "restarts", name)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        partial["restarts"][name] = {"commit": record["git"]["commit"],
                                     "cpu": record["hardware"].get("cpu"),
                                     "cpu_isa": record["hardware"].get("cpu_isa"),
                                     "saved": now()}
        saved.append(name)
    if saved:  # the index last: it names only restarts that are there whole
        files.write_json(os.path.join(directory(record_dir), INDEX), partial)
    return saved


class Saver:
    """`save` at most every `every_s` seconds, for the runner to call as output comes."""

    def __init__(self, run: Run, record_dir: str, record: dict, every_s: float = 30.0):
        self.run, self.record_dir, self.record, self.every_s = run, record_dir, record, every_s
        self.last = time.monotonic()

    def __call__(self) -> None:
        if time.monotonic() - self.last >= self.every_s:
            self.save()

    def save(self) -> None:
        self.last = time.monotonic()
        for name in save(self.run, self.record_dir, self.record):
            print(f"--- {self.run.run_id}: restart {name} finished; kept in "
                  f"{directory(self.record_dir)} (commit it: a rerun anywhere goes on "
                  f"from it)", flush=True)


def adopt(run: Run, argv: list, record_dir: str, record: dict) -> dict:
    """Adds the kept restarts of this run to its grid_progress/ (`argv`: what it executes
    with); returns {name: where it was made} of those added. Kept restarts of another
    command or of other input runs are deleted."""
    partial = read(record_dir)
    if partial is None:
        return {}
    if not belongs(partial, record):
        print(f"--- {run.run_id}: the restarts kept in {directory(record_dir)} were made "
              f"by another command or from other input runs: deleted", flush=True)
        shutil.rmtree(directory(record_dir))
        return {}
    from glue_suite.grid_progress import GridProgress  # TensorFlow: only here
    from glue_suite.run import grid_identity_of
    try:
        progress = GridProgress(run.out_dir, grid_identity_of(list(argv)))
    except (OSError, ValueError, InputError) as e:  # the run itself will say so
        print(f"--- {run.run_id}: the kept restarts are not added ({e})", flush=True)
        return {}
    added = {}
    for name, made in partial["restarts"].items():
        if progress.add(os.path.join(directory(record_dir), "restarts", name)):
            added[name] = made
    if added:
        print(f"--- {run.run_id}: {len(added)} restart(s) finished in earlier sittings "
              f"({', '.join(added)}), from {directory(record_dir)}", flush=True)
    return added


def kept_restarts(plan: Plan, output_dir: str) -> dict:
    """{run_id: names of its restarts kept from earlier sittings}, for the runs of the
    plan that would take them (same command)."""
    kept = {}
    for run in plan.runs.values():
        index = read(os.path.dirname(record_path(output_dir, run.run_id)))
        if index and same_command_as(run, index, plan.data_dir):
            kept[run.run_id] = list(index["restarts"])
    return kept


def shares_done(plan: Plan, kept: dict) -> dict:
    """{run_id: the share of its estimate that its kept restarts did}, counted in the
    restarts the estimate counts (`cost_model.grid_size`)."""
    return {k: min(1.0, len(names) / grid_size(plan.runs[k].config, _model_size(plan.runs[k])))
            for k, names in kept.items() if isinstance(plan.runs[k].config, FinetuneCommand)}


def pretraining_shares_done(plan: Plan, statuses: dict) -> dict:
    """{run_id: the share of its steps that its latest checkpoint holds} of the
    pretraining runs that will resume from it: "rerun" (stopped part-way) and "todo" (its
    record gone, its work dir not), not "changed" (`runner` sets that work dir aside).
    Checkpoints are in the work dir, so this counts on the machine that made them only."""
    shares = {}
    for run_id, run in plan.runs.items():
        if run.stage == "pretrain" and statuses[run_id] in ("rerun", "todo"):
            step = latest_checkpoint_step(default_checkpoint_dir(run.config.model_dir))
            if step:
                shares[run_id] = min(1.0, step / run.config.num_train_steps)
    return shares


def _model_size(run: Run) -> Optional[str]:
    """The size of the model `run` fine-tunes; None (the shipped checkpoint) where a
    hand-made run names no model."""
    return run.info.get("model", {}).get("size")


def print_kept(kept: dict, out=None) -> None:
    """A line per run with restarts kept from earlier sittings (`kept_restarts`)."""
    for run_id, names in kept.items():
        print(f"{run_id}: {len(names)} restart(s) done in earlier sittings "
              f"({', '.join(names)}; {PARTIAL}/ beside its record): it trains the others",
              file=out or sys.stdout)


def remove(record_dir: str) -> None:
    shutil.rmtree(directory(record_dir), ignore_errors=True)
