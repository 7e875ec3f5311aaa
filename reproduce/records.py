"""Run records: OUTPUT_DIR/runs/<run_id>/record.json, one per run of a plan.

The runner (`reproduce.runner`) writes a run's record when it starts ("running") and
when it ends: its command, git commit, hardware, wall time, status, metrics and output
files. The harness compares a record with the plan to decide whether the run is done
(`run_status`); `reproduce.tables` builds every table from the records alone, leaving
out the results of a record whose inputs were redone since (`mark_stale`).

Records are committed: every path in them is portable (`bert_tf.portable_paths`: data
files under $BERT_DATA_DIR, the rest relative to the working directory), and the plan is
compared with a record in that same form, so a run finished on one machine is finished
on another.
"""

import datetime
import glob
import json
import os
from typing import Optional

from bert_tf import files, portable_paths
from bert_tf.cli import InputError
from reproduce.plan import Plan, Run


def record_path(output_dir: str, run_id: str) -> str:
    return os.path.join(output_dir, "runs", run_id, "record.json")


def run_files_dir(output_dir: str, run_id: str) -> str:
    """Where the runner keeps a run's small outputs beside its record (`outputs.files`)."""
    return os.path.join(output_dir, "runs", run_id, "files")


def load_record(output_dir: str, run_id: str) -> Optional[dict]:
    try:
        with open(record_path(output_dir, run_id), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None  # absent, or unreadable: the run is redone


def load_records(output_dir: str) -> list:
    """Every record under OUTPUT_DIR/runs, in run-id order.

    Raises:
        InputError: a record is not valid JSON (e.g. truncated). Its cells would read
            "n/a (not run)" and hide that the run's result was lost, so the tables are
            not built: rerun the run (reproduce.all) or delete the record.
    """
    records = []
    for path in sorted(glob.glob(record_path(output_dir, "*"))):
        try:
            records.append(files.read_json(path))
        except InputError as e:
            raise InputError(e.path, e.line, f"corrupt record ({e.message}); rerun its run "
                                             f"with reproduce.all, or delete it") from None
    return records


def write_record(output_dir: str, record: dict, data_dir: Optional[str] = None) -> None:
    """Writes record.json all at once (a killed harness leaves the old record or the
    new), its paths portable; `data_dir` is the plan's."""
    path = record_path(output_dir, record["run_id"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    files.write_json(path, portable_paths.portable_record(record, data_dir))


def base_record(run: Run, plan: Plan) -> dict:
    """What every record of `run` holds, whatever its outcome; a rehearsal's run also
    its caps ({flag: (planned, capped)})."""
    rehearsal = {} if run.rehearsal is None else {"rehearsal": run.rehearsal}
    return {"run_id": run.run_id, "stage": run.stage, "scale": plan.scale,
            "strategy": plan.strategy, "module": run.module, "argv": list(run.args),
            "command": run.command, "cells": [vars(c) for c in run.cells],
            "tables": list(run.tables), "info": run.info, "needs": list(run.needs),
            "estimate_s": run.estimate_s, "outputs": {"dir": run.out_dir}, **rehearsal}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_status(run: Run, record: Optional[dict], output_dir: str,
               data_dir: Optional[str]) -> str:
    """finished | n/a | todo | rerun (killed or failed) | changed (its command was edited,
    or a run it reads from has been redone since). `data_dir`: the plan's."""
    same_command = record is not None and same_command_as(run, record, data_dir)
    if record and record.get("status") == "finished" and same_command:
        if _inputs_unchanged(record, output_dir):
            return "finished"
        return "changed"
    if run.unavailable:
        return "n/a"
    if record is None or record.get("status") in ("unavailable", "blocked"):
        return "todo"
    return "rerun" if same_command else "changed"


def same_command_as(run: Run, record: dict, data_dir: Optional[str]) -> bool:
    """Whether the record (or anything with its "module" and "argv") ran the run's
    command, compared as the record holds it."""
    argv = portable_paths.portable_record(list(run.args), data_dir)
    return record.get("argv") == argv and record.get("module") == run.module


def _inputs_unchanged(record: dict, output_dir: str) -> bool:
    """Whether every run this one read from is the same run (same end time) as then."""
    return not redone_inputs(record, lambda run_id: load_record(output_dir, run_id))


def redone_inputs(record: dict, lookup) -> list:
    """The runs `record` read from that are no longer the runs it read: redone, running
    again, or gone. `lookup`: run id -> its record now, or None."""
    redone = []
    for run_id, ended in (record.get("needs_ended") or {}).items():
        need = lookup(run_id)
        if need is None or need.get("ended") != ended:
            redone.append(run_id)
    return redone


def mark_stale(records: list) -> list:
    """`records` with every finished one whose inputs were redone since marked "stale".

    Its numbers came from a checkpoint that no longer exists (e.g. fine-tuned from a
    pretraining run that has been rerun with another recipe), so no table may show them
    beside the new runs' numbers. A run that a plain rerun of the plan redoes stops being
    stale then; one that the plan no longer has stays stale, its cells "n/a (stale)".
    """
    by_id = {r.get("run_id"): r for r in records}
    marked = []
    for record in records:
        redone = redone_inputs(record, by_id.get) if record.get("status") == "finished" else []
        if redone:
            record = {**record, "status": "stale",
                      "reason": f"{', '.join(redone)} redone since this run read it"}
        marked.append(record)
    return marked
