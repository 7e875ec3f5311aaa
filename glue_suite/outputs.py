"""What a run leaves in --output_dir: metrics.json and predictions, all of them or none.

`glue_suite.run` writes its outputs (metrics.json, the dev predictions, submission/) to
<output_dir>/.staging/ and moves them into place together when the run ends, metrics.json
last (`bert_tf.files.staged_outputs`): a run that fails or is killed leaves the previous
run's complete set, and a metrics.json never sits beside another run's predictions (they
would disagree, e.g. on the learning rate). run.log (a log, appended to) and the
featurization cache (cache/) are not outputs and stay.

A directory that already holds a finished run (its metrics.json) is refused unless
--overwrite; then the earlier run's outputs move to <output_dir>/previous-<time>/ once the
new ones are complete.
"""

import dataclasses
import os
from typing import TYPE_CHECKING, Optional

from bert_tf import files, provenance
from bert_tf.checkpoints import Checkpoint
from bert_tf.cli import InputError
from glue_suite import features as feats
from glue_suite.run_config import RunConfig
from glue_suite.tasks import get_task

if TYPE_CHECKING:  # glue_suite.run imports this module
    from glue_suite.run import GridResult, Splits

METRICS = "metrics.json"


def previous_run(output_dir: str, overwrite: bool) -> list[str]:
    """The entries of output_dir that a finished run there wrote, metrics.json first;
    [] where there is none.

    Raises:
        InputError: a finished run is there and `overwrite` is False.
    """
    path = os.path.join(output_dir, METRICS)
    if not os.path.exists(path):
        return []
    record = files.read_json(path)
    if not overwrite:
        raise InputError(path, None, f"holds a finished run ({record.get('task')}); pass "
                                     f"--overwrite to move its outputs to "
                                     f"{os.path.join(output_dir, files.PREVIOUS)}<time>/ "
                                     f"once the new run's are complete, or choose another "
                                     f"--output_dir")
    return [METRICS, *_top_entries(record.get("outputs") or (),
                                   (record.get("config") or {}).get("output_dir", output_dir))]


def _top_entries(paths, directory: str) -> list[str]:
    """The first component of each path under `directory` (the record's own output_dir,
    relative or absolute as it was given), e.g. "submission" for submission/RTE.tsv."""
    entries = []
    for path in paths:
        top = os.path.relpath(path, directory).split(os.sep)[0]
        # (not a path outside the directory, nor one of staged_outputs' own folders)
        if top not in (".", "..", files.STAGING) and not top.startswith(files.PREVIOUS) \
                and top not in entries:
            entries.append(top)
    return entries


def staged(output_dir: str, previous: list[str]):
    """`with staged(output_dir, previous) as stage:` write every output under stage.path,
    metrics.json last (`bert_tf.files.staged_outputs`)."""
    return files.staged_outputs(output_dir, METRICS, previous)


def result_record(config: RunConfig, splits: "Splits", checkpoint: Checkpoint,
                  vocab_sha256: str, grid: "GridResult", paths: list[str],
                  wall_seconds: float, command: Optional[str]) -> dict:
    """The content of metrics.json (its keys: glue_suite.run's docstring); `paths`: the
    outputs as they are once in place."""
    spec, best = get_task(config.task), grid.best
    return {
        "task": spec.name,
        "metrics": best["metrics"],
        "main_metric": spec.main_metric,
        "learning_rate": best["learning_rate"],
        "seed": best["seed"],
        "degenerate": best["degenerate"],
        "train_task": config.train_task,
        "train_examples": len(splits.train.examples),
        "train_features": feats.num_rows(splits.train.features),
        "max_train_examples": config.max_train_examples,
        "eval_examples": {s.name: len(s.examples) for s in splits.evals},
        "config": dataclasses.asdict(config),
        "checkpoint": {"directory": checkpoint.directory, "format": checkpoint.format,
                       "vocab_file": checkpoint.vocab_file, "vocab_sha256": vocab_sha256,
                       "lower_case": checkpoint.lower_case,
                       "parameters": checkpoint.config.num_parameters(),
                       "config": checkpoint.config.to_dict(),
                       # None: not recorded (a checkpoint other than our pretraining's)
                       "pretraining_seq_length": checkpoint.pretraining_seq_length},
        "grid": {**grid.summary, "runs": grid.runs},
        "data_files": {s.name: s.source for s in splits.all},
        "bad_rows": {s.name: s.bad_rows for s in splits.all},
        "featurization": {s.name: s.featurization for s in splits.all},
        "train_seconds": round(sum(r["train"]["seconds"] for r in grid.runs), 1),
        "wall_seconds": round(wall_seconds, 1),
        "hardware": {**provenance.describe(), "git": provenance.git_commit()},
        "command": command,
        "outputs": sorted(paths),
    }
