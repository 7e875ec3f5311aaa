"""Runs the plan of a scale: every table of the paper in one resumable command.

    python -m reproduce.all --strategy cpu --scale cpu [--only table1,table5] \\
        [--data_dir D] [--output_dir results] [--work_dir runs] [--dry_run]
    python -m reproduce.all --strategy tpu --tpu my-tpu --scale paper --work_dir gs://b/runs ...
    python -m reproduce.all --strategy cpu --scale paper --rehearse [--runs 'paper.data.*']
    python -m reproduce.all --strategy cpu --scale cpu --units 1   # one sitting: the next unit

It prints the plan (every run, its settings, an estimated time) and then runs it, one
project CLI subprocess at a time, in dependency order:

    results/runs/<run_id>/record.json   written atomically when a run starts ("running")
                                        and when it ends: command, git commit, hardware,
                                        wall time, status, metrics, output paths
    results/runs/<run_id>/log.txt       the CLI's output
    results/runs/<run_id>/files/        its small outputs (metrics, predictions, GLUE
                                        submission files), so results/ stands alone
    runs/<run_id>/                      everything the CLI writes (shards, checkpoints)
    results/tables/                     rebuilt at the end (`python -m reproduce.tables`)

Rerunning skips finished runs whose command, and whose inputs (the runs it reads from),
are unchanged. The plan comes in units, one sitting each (a pretraining run and the runs
that read its exports, which may not survive a move to another machine;
reproduce.units): --units N runs the next N (those whose rest fits a sitting on this
machine first, counting a stopped pretraining run's checkpoints here as done), one after
another, and stops, so that their records can be committed (each
unit's as soon as it ends). A killed run is rerun: the pretraining CLI resumes from its
last checkpoint, fine-tuning from the grid points it finished
(glue_suite.grid_progress), data creation restarts. Each restart a fine-tuning run
finishes is also kept beside its record (results/runs/<run_id>/partial/,
reproduce.partial): committed, it lets the run go on from there on another machine, so a
run longer than a sitting still finishes over several. A run whose command changed (the
plan was edited), or whose inputs were redone, starts over in a clean directory (the old
one is set aside). Runs whose data is missing are recorded as n/a with the reason, and
are retried on the next invocation. With no data directory at all (no --data_dir, none
at $BERT_DATA_DIR or ./data), fine-tuning runs of GLUE, SQuAD and CoNLL-2003 read
tensorflow-datasets instead (--source tfds, as glue_suite.run would); a --data_dir that
does not exist is an error.

Records written to the committed results/ (the default --output_dir) must name code that a
commit holds: on a tree with uncommitted changes (outside results/) the harness refuses to
start unless --allow_dirty. Elsewhere (a rehearsal's runs/rehearsal/results, a test's
directory) it starts; every record names the changed files and the diff's sha256.

The pieces: reproduce.experiments builds the plan (reproduce.plan, .commands, .cost_model),
reproduce.report prints it, reproduce.runner runs it, reproduce.records keeps the records,
reproduce.tables builds the tables from them. --rehearse runs every command with its
budget capped (reproduce.rehearsal), under runs/rehearsal/.
"""

import argparse
import os
import signal
import sys
import time
from typing import Optional

from bert_tf import provenance
from bert_tf.cli import run_main
from glue_suite.data_dir import ENV_VAR, no_data_directory, resolve_data_dir, set_up_data_dir
from reproduce import partial, rehearsal
from reproduce.commands import STRATEGIES
from reproduce.experiments import TABLES, build_plan
from reproduce.records import load_record, run_status
from reproduce.report import duration, print_costs, print_plan
from reproduce.runner import run_plan, stop_child
from reproduce.scales import SCALES
from reproduce.units import DONE, Speed, next_units, print_units

COMMITTED_RESULTS = os.path.join(provenance.REPO, "results")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reproduce.all", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", choices=STRATEGIES, required=True)
    p.add_argument("--tpu", help="with --strategy tpu: TPU name or grpc://host:port")
    p.add_argument("--scale", choices=tuple(SCALES), required=True)
    p.add_argument("--only", help=f"comma-separated tables: {','.join(TABLES)}")
    p.add_argument("--data_dir", help="benchmark data root (default: $BERT_DATA_DIR, else "
                                      "./data; where neither exists, fine-tuning reads "
                                      "GLUE, SQuAD and CoNLL-2003 from tensorflow-datasets)")
    p.add_argument("--runs", help="comma-separated run-id globs (and the runs they need), "
                                  "e.g. 'paper.finetune.large-nsp.mrpc,*.squad2.0-main'")
    p.add_argument("--output_dir", help="records and tables (default: results; "
                                        f"{rehearsal.OUTPUT_DIR} with --rehearse)")
    p.add_argument("--work_dir", help="the CLIs' outputs: shards, checkpoints (large; not "
                                      f"committed; default: runs; {rehearsal.WORK_DIR} with "
                                      "--rehearse)")
    p.add_argument("--rehearse", action="store_true",
                   help="run every command as planned with only its budget capped (a few "
                        "steps and examples), to find bugs before paying for the real run")
    p.add_argument("--keep_work_dir", action="store_true",
                   help="with --rehearse: keep the work dir (deleted when all runs finish)")
    p.add_argument("--units", type=int, default=None,
                   help="run only the next N units that are not done (a pretraining run and "
                        "the runs that read it: one sitting each; reproduce.units), then stop")
    p.add_argument("--dry_run", action="store_true", help="print the plan and stop")
    p.add_argument("--allow_dirty", action="store_true",
                   help="write records into this repository's results/ from a tree with "
                        "uncommitted changes (the records name the files and the diff's "
                        "sha256); refused otherwise")
    p.add_argument("--quiet", action="store_true", help="do not echo the CLIs' output")
    p.add_argument("--jobs", type=int, default=None,
                   help="runs at once, pretraining always alone (default 1; with "
                        "--rehearse 2: its short runs are start-up, mostly one core each)")
    return p


def dirty_tree_error(output_dir: str, allow_dirty: bool) -> str:
    """The error line that stops a run whose records would go into the committed results/
    from code no commit holds; "" where it may start."""
    inside = os.path.realpath(output_dir) + os.sep
    if allow_dirty or not inside.startswith(os.path.realpath(COMMITTED_RESULTS) + os.sep):
        return ""
    changes = provenance.uncommitted(provenance.git_commit())
    if not changes:
        return ""
    return (f"error: {changes}: records in {output_dir} must name committed code; commit "
            f"first, or pass --allow_dirty (the records then name these files and the diff)")


def missing_data_dir_error(data_dir_flag: Optional[str]) -> str:
    """The error line for a --data_dir that does not exist (it would plan every run as
    n/a and exit 0 having run nothing); "" otherwise. Only a directory nobody named
    falls back to tensorflow-datasets (`glue_suite.data_dir.no_data_directory`)."""
    if not data_dir_flag or os.path.isdir(data_dir_flag):
        return ""
    return (f"error: --data_dir {data_dir_flag} does not exist; give the benchmark data "
            f"root, or no --data_dir to use ${ENV_VAR}, else ./data, else "
            f"tensorflow-datasets for the fine-tuning tasks it has")


def tfds_fallback_note(data_dir: str) -> str:
    """What a plan without a data directory runs, printed before it."""
    return (f"note: no data directory at {data_dir} (--data_dir, ${ENV_VAR}, else ./data): "
            f"fine-tuning on GLUE, SQuAD and CoNLL-2003 reads them from tensorflow-datasets "
            f"(--source tfds; downloaded on first use, network needed); runs that need the "
            f"pretraining corpus, and SWAG, are n/a")


def _runs_to_do(plan, statuses: dict) -> int:
    """Runs of `plan` not done (a unit's plan also holds the done runs it needs)."""
    return sum(statuses[k] not in DONE for k in plan.runs)


def main(argv=None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    data_dir = resolve_data_dir(args.data_dir)
    tables = TABLES
    if args.only:
        tables = tuple(t.strip() for t in args.only.split(",") if t.strip())
        unknown = sorted(set(tables) - set(TABLES))
        if unknown:
            print(f"error: unknown tables {unknown}; expected some of {', '.join(TABLES)}",
                  file=sys.stderr)
            return 2
    output_dir = args.output_dir or (rehearsal.OUTPUT_DIR if args.rehearse else "results")
    work_dir = args.work_dir or (rehearsal.WORK_DIR if args.rehearse else "runs")
    # A dry run writes no record, so only a real run must name committed code.
    error = (("" if args.dry_run else dirty_tree_error(output_dir, args.allow_dirty))
             or missing_data_dir_error(args.data_dir))
    if error:
        print(error, file=sys.stderr)
        return 2
    tfds_fallback = no_data_directory(args.data_dir)
    if tfds_fallback:
        print(tfds_fallback_note(data_dir), file=sys.stderr)
    plan = build_plan(args.scale, args.strategy, data_dir, work_dir, tables, args.tpu,
                      tfds_fallback)
    if args.runs:
        plan = plan.select_runs([p.strip() for p in args.runs.split(",") if p.strip()])
    if args.rehearse:
        plan = rehearsal.rehearse_plan(plan)
    records = {k: load_record(output_dir, k) for k in plan.runs}
    statuses = {k: run_status(r, records[k], output_dir, plan.data_dir)
                for k, r in plan.runs.items()}
    took = {k: records[k]["wall_seconds"] for k, status in statuses.items()
            if status == "finished" and records[k].get("wall_seconds") is not None}
    print_plan(plan, statuses, took)
    kept = partial.kept_restarts(plan, output_dir)
    partial.print_kept(kept)
    speed = None
    # What earlier sittings did: restarts kept beside records, and pretraining
    # checkpoints in this machine's work dir.
    shares_done = {**partial.shares_done(plan, kept),
                   **partial.pretraining_shares_done(plan, statuses)}
    if plan.strategy == "cpu":  # sittings on one machine; elsewhere the work dir persists
        from bert_tf.benchmark import matmul_peak_gflops  # TensorFlow: a second to import
        speed = Speed(matmul_peak_gflops("float32", repeats=5), provenance.native_bfloat16())
        print_units(plan, statuses, speed, shares_done=shares_done)
    if args.dry_run:
        print_costs(plan)
        return 0
    parts = [("the plan", plan)]
    if args.units is not None:
        parts = next_units(plan, statuses, args.units, speed, shares_done)
        listed = ", ".join(f"{name} ({_runs_to_do(part, statuses)} runs to do)"
                           for name, part in parts)
        print(f"--units {args.units}: the next unit(s), those that fit a sitting here first, "
              f"one after another: {listed}", flush=True)

    signal.signal(signal.SIGTERM, stop_child)
    jobs = args.jobs or (rehearsal.JOBS if args.rehearse else 1)
    began, final = time.time(), {}
    try:
        for _, part in parts:
            final.update(run_plan(part, output_dir, data_dir, echo=not args.quiet, jobs=jobs))
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    from reproduce import tables as tables_module  # pandas: not needed until the end
    written = tables_module.build_tables(output_dir, set_up_data_dir(args.data_dir))
    counts = {}
    for status in final.values():
        counts[status] = counts.get(status, 0) + 1
    print(f"Done in {duration(time.time() - began)}: "
          f"{', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}. "
          f"Wrote {len(written)} files to {os.path.join(output_dir, 'tables')}.")
    if args.rehearse:
        rehearsal.clean_up(work_dir, done=set(counts) <= {"finished", "unavailable"},
                           keep=args.keep_work_dir)
    return 1 if counts.get("failed") else 0


if __name__ == "__main__":
    run_main(main)
