"""Runs the plan of a scale: every table of the paper in one resumable command.

    python -m reproduce.all --strategy cpu --scale cpu [--only table1,table5] \\
        [--data_dir D] [--output_dir results] [--work_dir runs] [--dry_run]
    python -m reproduce.all --strategy tpu --tpu my-tpu --scale paper --work_dir gs://b/runs ...
    python -m reproduce.all --strategy cpu --scale paper --rehearse [--runs 'paper.data.*']

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
are unchanged. A killed run is rerun: the pretraining CLI resumes from its last
checkpoint, the others restart. A run whose command changed (the plan was edited), or
whose inputs were redone, starts over in a clean directory (the old one is set aside). Runs whose
data is missing are recorded as n/a with the reason, and are retried on the next invocation.

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

from reproduce import rehearsal
from reproduce.commands import STRATEGIES
from reproduce.experiments import TABLES, build_plan
from reproduce.records import load_record, run_status
from reproduce.report import duration, print_costs, print_plan
from reproduce.runner import run_plan, stop_child
from reproduce.scales import SCALES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reproduce.all", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", choices=STRATEGIES, required=True)
    p.add_argument("--tpu", help="with --strategy tpu: TPU name or grpc://host:port")
    p.add_argument("--scale", choices=tuple(SCALES), required=True)
    p.add_argument("--only", help=f"comma-separated tables: {','.join(TABLES)}")
    p.add_argument("--data_dir", help="benchmark data root (default: $BERT_DATA_DIR, else ./data)")
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
    p.add_argument("--dry_run", action="store_true", help="print the plan and stop")
    p.add_argument("--quiet", action="store_true", help="do not echo the CLIs' output")
    p.add_argument("--jobs", type=int, default=None,
                   help="runs at once, pretraining always alone (default 1; with "
                        "--rehearse 2: its short runs are start-up, mostly one core each)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    data_dir = args.data_dir or os.environ.get("BERT_DATA_DIR") or "data"
    tables = TABLES
    if args.only:
        tables = tuple(t.strip() for t in args.only.split(",") if t.strip())
        unknown = sorted(set(tables) - set(TABLES))
        if unknown:
            print(f"error: unknown tables {unknown}; expected some of {', '.join(TABLES)}",
                  file=sys.stderr)
            return 2
    if not os.path.isdir(data_dir):
        print(f"warning: data directory {data_dir} does not exist; every run needing data "
              f"is n/a (set --data_dir or $BERT_DATA_DIR)", file=sys.stderr)
    output_dir = args.output_dir or (rehearsal.OUTPUT_DIR if args.rehearse else "results")
    work_dir = args.work_dir or (rehearsal.WORK_DIR if args.rehearse else "runs")
    plan = build_plan(args.scale, args.strategy, data_dir, work_dir, tables, args.tpu)
    if args.runs:
        plan = plan.select_runs([p.strip() for p in args.runs.split(",") if p.strip()])
    if args.rehearse:
        plan = rehearsal.rehearse_plan(plan)
    statuses = {k: run_status(r, load_record(output_dir, k), output_dir)
                for k, r in plan.runs.items()}
    print_plan(plan, statuses)
    if args.dry_run:
        print_costs(plan)
        return 0

    signal.signal(signal.SIGTERM, stop_child)
    began = time.time()
    try:
        final = run_plan(plan, output_dir, data_dir, echo=not args.quiet,
                         jobs=args.jobs or (rehearsal.JOBS if args.rehearse else 1))
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    from reproduce import tables as tables_module  # pandas: not needed until the end
    written = tables_module.build_tables(output_dir)
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
    sys.exit(main())
