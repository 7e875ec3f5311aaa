"""Runs the plan of a scale: every table of the paper in one resumable command.

    python -m reproduce.all --strategy cpu --scale cpu [--only table1,table5] \\
        [--data_dir D] [--output_dir results] [--work_dir runs] [--dry_run]
    python -m reproduce.all --strategy tpu --tpu my-tpu --scale paper --work_dir gs://b/runs ...

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
data is missing, or that need a flag a CLI does not (yet) have, are recorded as n/a
with the reason, and are retried on the next invocation.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

from bert_tf import provenance
from reproduce.plan import STRATEGIES, TABLES, SCALES, Plan, Run, build_plan

MODULES = ("bert_tf.create_pretraining_data", "bert_tf.pretrain", "glue_suite.run")
# Small outputs copied next to the record (globs relative to the run's output directory).
KEEP = {
    "data": ("metadata.json",),
    "pretrain": ("metrics.csv", "eval_results.json", "pretrain_config.json"),
    "finetune": ("metrics.json", "*_predictions.tsv", "predictions.json", "null_odds.json",
                 "submission/*.tsv"),
}
RESULT_FILE = {"data": "metadata.json", "pretrain": "eval_results.json",
               "finetune": "metrics.json"}


# --------------------------------------------------------------------- file system
class _Files:
    """os / glob for local paths; tf.io.gfile for remote ones (gs://, for TPUs), imported
    only then, so that the harness itself stays free of TensorFlow."""

    @staticmethod
    def _gfile(path: str):
        if "://" not in path:
            return None
        import tensorflow as tf
        return tf.io.gfile

    @classmethod
    def read(cls, path: str) -> str:
        gfile = cls._gfile(path)
        if gfile:
            with gfile.GFile(path) as f:
                return f.read()
        with open(path, encoding="utf-8") as f:
            return f.read()

    @classmethod
    def glob(cls, pattern: str) -> list:
        gfile = cls._gfile(pattern)
        return sorted(gfile.glob(pattern) if gfile else glob.glob(pattern))

    @classmethod
    def isdir(cls, path: str) -> bool:
        gfile = cls._gfile(path)
        return gfile.isdir(path) if gfile else os.path.isdir(path)

    @classmethod
    def copy(cls, source: str, target: str) -> None:
        gfile = cls._gfile(source)
        if gfile:
            gfile.copy(source, target, overwrite=True)
        else:
            shutil.copyfile(source, target)

    @classmethod
    def makedirs(cls, path: str) -> None:
        gfile = cls._gfile(path)
        if gfile:
            gfile.makedirs(path)
        else:
            os.makedirs(path, exist_ok=True)

    @classmethod
    def set_aside(cls, path: str, aside: str) -> None:
        gfile = cls._gfile(path)
        if gfile:
            gfile.rename(path, aside)
        else:
            os.rename(path, aside)


# ------------------------------------------------------------------------- records
def record_path(output_dir: str, run_id: str) -> str:
    return os.path.join(output_dir, "runs", run_id, "record.json")


def load_record(output_dir: str, run_id: str) -> Optional[dict]:
    try:
        with open(record_path(output_dir, run_id), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None  # absent, or unreadable: the run is redone


def write_record(output_dir: str, record: dict) -> None:
    """Writes record.json atomically (temporary file + rename)."""
    path = record_path(output_dir, record["run_id"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=False, allow_nan=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_status(run: Run, record: Optional[dict], output_dir: str) -> str:
    """finished | n/a | todo | rerun (killed or failed) | changed (its command was edited,
    or a run it reads from has been redone since)."""
    if record and record.get("status") == "finished" and _same_command(run, record):
        if _inputs_unchanged(record, output_dir):
            return "finished"
        return "changed"
    if run.unavailable:
        return "n/a"
    if record is None or record.get("status") in ("unavailable", "blocked"):
        return "todo"
    return "rerun" if _same_command(run, record) else "changed"


def _same_command(run: Run, record: dict) -> bool:
    return record.get("argv") == list(run.args) and record.get("module") == run.module


def _inputs_unchanged(record: dict, output_dir: str) -> bool:
    """Whether every run this one read from is the same run (same end time) as then."""
    for run_id, ended in (record.get("needs_ended") or {}).items():
        need = load_record(output_dir, run_id)
        if need is None or need.get("ended") != ended:
            return False
    return True


def _base_record(run: Run, plan: Plan) -> dict:
    return {"run_id": run.run_id, "stage": run.stage, "scale": plan.scale,
            "strategy": plan.strategy, "module": run.module, "argv": list(run.args),
            "command": run.command, "cells": [vars(c) for c in run.cells],
            "tables": list(run.tables), "info": run.info, "needs": list(run.needs),
            "estimate_s": run.estimate_s, "outputs": {"dir": run.out_dir}}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------- CLI flags
def cli_flags(modules=MODULES) -> dict:
    """{module: {"--flag": (choices) or None}} from each CLI's --help (run in parallel);
    None for a CLI that does not start (not written yet, or broken)."""
    processes = {}
    for module in modules:
        try:
            processes[module] = subprocess.Popen(
                [sys.executable, "-m", module, "--help"], stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, env=_child_env(None))
        except OSError:
            processes[module] = None
    flags = {}
    for module, process in processes.items():
        flags[module] = None
        if process is None:
            continue
        try:
            out, _ = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            continue
        if process.returncode == 0:
            flags[module] = parse_help(out)
    return flags


def parse_help(text: str) -> dict:
    """argparse --help -> {"--flag": (choices) or None}."""
    found = {}
    for flag, choices in re.findall(r"(--[A-Za-z0-9_]+)(?:[ =]\{([^}]*)\})?", text):
        if choices or flag not in found:
            found[flag] = tuple(choices.split(",")) if choices else None
    return found


def _child_env(data_dir: Optional[str]) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if data_dir:
        env["BERT_DATA_DIR"] = data_dir
    return env


# -------------------------------------------------------------------------- printing
def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h{minutes % 60:02d}" if minutes >= 60 else f"{minutes}m"


def _settings(run: Run) -> str:
    """One line of what matters about a run."""
    info, args = run.info, dict(zip(run.args[::2], run.args[1::2]))
    if run.stage == "data":
        rates = "/".join(str(round(100 * r)) for r in info["mask_rates"])
        kind = "held-out" if info["heldout"] else f"dupe {args.get('--dupe_factor')}"
        return f"{info['objective']} mask {rates} {info['vocab']} seq {info['max_seq_length']} {kind}"
    if run.stage == "pretrain":
        m = info["model"]
        return (f"{m['size']} {m['label']} {m['objective']} {m['steps']} x {m['batch_size']} "
                f"lr {args['--learning_rate']}")
    s = info["settings"]
    parts = [info["task"], "<-", info["model"].get("size") or "default",
             "lr " + (",".join(f"{x:g}" for x in s["learning_rates"]) if s["learning_rates"]
                      else "grid"),
             f"seeds {s['seeds']}"]
    if s["max_train_examples"]:
        parts.append(f"cap {s['max_train_examples']}")
    if info.get("pretrain_step") is not None:
        parts.append(f"@step {info['pretrain_step']}")
    if info.get("head"):
        parts.append(f"+{info['head']} {info['bilstm_units']}")
    if info.get("feature_mode"):
        parts.append(f"features {info['feature_mode']} (BiLSTM {info['bilstm_units']})")
    return " ".join(parts)


def _used_by(plan: Plan) -> dict:
    """run_id -> tables that need it, directly or through the runs that read it."""
    used = {k: set(r.tables) for k, r in plan.runs.items()}
    for run_id in reversed(list(plan.runs)):
        for need in plan.runs[run_id].needs:
            used[need] |= used[run_id]
    return used


def print_plan(plan: Plan, statuses: dict, out=None) -> None:
    out = out or sys.stdout
    scale = SCALES[plan.scale]
    print(f"Plan: scale {plan.scale} ({scale.description}), strategy {plan.strategy}, "
          f"{len(plan.runs)} runs", file=out)
    used = _used_by(plan)
    print(f"{'status':8s} {'est':>6s}  {'run':58s} {'tables':24s} settings", file=out)
    for run in plan.runs.values():
        status = statuses[run.run_id]
        tables = ",".join(t.replace("table", "T").replace("figure", "F")
                          for t in TABLES if t in used[run.run_id])
        note = f"  [{run.unavailable}]" if run.unavailable else ""
        estimate = "-" if run.unavailable else _duration(run.estimate_s)
        print(f"{status:8s} {estimate:>6s}  {run.run_id:58s} {tables:24s} "
              f"{_settings(run)}{note}", file=out)
    todo = [r for r in plan.runs.values() if statuses[r.run_id] in ("todo", "rerun", "changed")]
    by_stage = {}
    for run in todo:
        by_stage.setdefault(run.stage, []).append(run.estimate_s)
    parts = []
    for stage, estimates in by_stage.items():
        total = None if None in estimates else sum(estimates)
        parts.append(f"{stage} {len(estimates)} runs {_duration(total)}")
    estimates = [r.estimate_s for r in todo]
    total = None if None in estimates else sum(estimates)
    na = sum(s == "n/a" for s in statuses.values())
    done = sum(s == "finished" for s in statuses.values())
    print(f"To run: {len(todo)} runs, estimated {_duration(total)} ({'; '.join(parts) or '-'}); "
          f"finished {done}; n/a {na}. Estimates: {_estimate_basis(plan.strategy)}", file=out)


def _estimate_basis(strategy: str) -> str:
    if strategy == "cpu":
        return ("this project's 2-core CPU (Base 3, Mini 40, Tiny 140 training examples/s "
                "at 128 tokens), scaled by FLOPs")
    if strategy == "tpu":
        return "the paper's 4 Cloud TPUs (16 chips) for BERT-Base, scaled by FLOPs"
    return f"none measured for {strategy} ('?')"


# ------------------------------------------------------------------------- running
class _Child:
    """The running CLI, so that SIGTERM / Ctrl-C stop it before the harness exits."""
    process: Optional[subprocess.Popen] = None


def _stop_child(signum, frame):
    if _Child.process and _Child.process.poll() is None:
        _Child.process.terminate()
        try:
            _Child.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _Child.process.kill()
    raise KeyboardInterrupt(f"signal {signum}")


def _stream(command: list, log_path: str, env: dict, echo: bool) -> int:
    """Runs `command`, appending its output to log_path (and echoing it); returns its
    exit status."""
    with open(log_path, "ab") as log:
        log.write(f"\n=== {_now()} {' '.join(command)}\n".encode())
        log.flush()
        _Child.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                chunk = os.read(_Child.process.stdout.fileno(), 65536)
                if not chunk:
                    break
                log.write(chunk)
                log.flush()
                if echo:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
            return _Child.process.wait()
        finally:
            _Child.process = None


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 20000))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    # Progress bars redraw with carriage returns: each redraw is a line here.
    kept = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _error_line(tail: str) -> str:
    """The most telling line of a failed run's output."""
    lines = tail.splitlines()
    for pattern in (r"^error: ", r"Error\b", r"ERROR"):
        for line in reversed(lines):
            if re.search(pattern, line):
                return line.strip()[:300]
    return (lines[-1].strip()[:300] if lines else "no output")


def _collect(run: Run, files_dir: str) -> tuple:
    """(metrics, result, copied files) from the run's output directory."""
    result = json.loads(_Files.read(os.path.join(run.out_dir, RESULT_FILE[run.stage])))
    copied = []
    for pattern in KEEP[run.stage]:
        for path in _Files.glob(os.path.join(run.out_dir, pattern)):
            relative = path[len(run.out_dir):].lstrip("/")
            target = os.path.join(files_dir, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _Files.copy(path, target)
            copied.append(relative)
    if run.stage == "finetune":
        metrics = result["metrics"]
        result = {k: v for k, v in result.items() if k != "hardware"}
    elif run.stage == "pretrain":
        metrics = result
        missing = [step for step in _export_steps(run)
                   if not _Files.isdir(os.path.join(run.out_dir, f"export_{step}"))]
        if not _Files.isdir(os.path.join(run.out_dir, "export")) or missing:
            raise FileNotFoundError(
                f"{run.out_dir}: no export/ or export_<step>/ for steps {missing}")
    else:
        metrics = {k: result.get(k) for k in ("num_instances", "instances_per_second",
                                               "peak_rss_mb", "seconds")}
        result = {k: v for k, v in result.items() if k != "shards"}
    return metrics, result, copied


def _export_steps(run: Run) -> list:
    args = list(run.args)
    if "--export_steps" not in args:
        return []
    return [int(x) for x in args[args.index("--export_steps") + 1].split(",")]


def execute(run: Run, plan: Plan, output_dir: str, data_dir: str, echo: bool = True) -> dict:
    """Runs one CLI and writes its record (status "running" first, then the outcome)."""
    record = _base_record(run, plan)
    record_dir = os.path.dirname(record_path(output_dir, run.run_id))
    os.makedirs(record_dir, exist_ok=True)
    started = time.time()
    record.update(status="running", started=_now(), git=provenance.git_commit(),
                  hardware=provenance.describe(), log="log.txt",
                  needs_ended={n: (load_record(output_dir, n) or {}).get("ended")
                               for n in run.needs})
    write_record(output_dir, record)
    _Files.makedirs(run.out_dir)
    log_path = os.path.join(record_dir, "log.txt")
    returncode = _stream([sys.executable, "-m", run.module, *run.args], log_path,
                         _child_env(data_dir), echo)
    record.update(returncode=returncode, ended=_now(),
                  wall_seconds=round(time.time() - started, 1))
    tail = _tail(log_path)
    if returncode != 0:
        record.update(status="failed", reason=f"exit {returncode}: {_error_line(tail)}",
                      log_tail=tail)
    else:
        try:
            metrics, result, copied = _collect(run, os.path.join(record_dir, "files"))
            record.update(status="finished", metrics=metrics, result=result)
            record["outputs"]["files"] = copied
        except (OSError, KeyError, ValueError) as e:
            record.update(status="failed", reason=f"outputs missing: {e}", log_tail=tail)
    write_record(output_dir, record)
    return record


def run_plan(plan: Plan, output_dir: str, data_dir: str, echo: bool = True) -> dict:
    """Runs every unfinished run of the plan in order; returns {run_id: status}."""
    final = {}
    for run in plan.runs.values():
        record = load_record(output_dir, run.run_id)
        status = run_status(run, record, output_dir)
        if status == "finished":
            final[run.run_id] = "finished"
            base = json.loads(json.dumps(_base_record(run, plan), default=str))
            if any(record.get(k) != base[k] for k in ("cells", "tables", "info")):
                # The plan now files this result under other cells: same run, new labels.
                write_record(output_dir, {**record, **{k: base[k] for k in
                                                       ("cells", "tables", "info")}})
            continue
        if status == "n/a":
            # Rewritten only when the reason changes, so a re-run leaves results/ clean.
            known = (record or {}).get("status"), (record or {}).get("reason")
            if known != ("unavailable", run.unavailable):
                write_record(output_dir, {**_base_record(run, plan), "status": "unavailable",
                                          "reason": run.unavailable, "ended": _now()})
            final[run.run_id] = "unavailable"
            continue
        blocked = [n for n in run.needs if final.get(n) != "finished"]
        if blocked:
            reason = f"needs {blocked[0]} ({final.get(blocked[0], 'not run')})"
            write_record(output_dir, {**_base_record(run, plan), "status": "blocked",
                                      "reason": reason, "ended": _now()})
            final[run.run_id] = "blocked"
            print(f"--- {run.run_id}: blocked, {reason}", flush=True)
            continue
        if status == "changed" and _Files.isdir(run.out_dir):
            # Its outputs (checkpoints above all) belong to another command: set aside,
            # not deleted, in case the change was a mistake.
            aside = f"{run.out_dir}.old-{time.strftime('%Y%m%d-%H%M%S')}"
            print(f"--- {run.run_id}: command changed; moving {run.out_dir} to {aside}",
                  flush=True)
            _Files.set_aside(run.out_dir, aside)
        print(f"--- {run.run_id} ({'resuming' if status == 'rerun' else 'starting'}, "
              f"estimated {_duration(run.estimate_s)}): {run.command}", flush=True)
        record = execute(run, plan, output_dir, data_dir, echo)
        final[run.run_id] = record["status"]
        summary = ", ".join(f"{k} {v:.4g}" for k, v in (record.get("metrics") or {}).items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool))
        print(f"--- {run.run_id}: {record['status']} in {_duration(record['wall_seconds'])}"
              f"{' ' + record.get('reason', '') if record['status'] != 'finished' else ''}"
              f"{': ' + summary[:300] if summary else ''}", flush=True)
    return final


# ------------------------------------------------------------------------- main
def _parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m reproduce.all", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", choices=STRATEGIES, required=True)
    p.add_argument("--tpu", help="with --strategy tpu: TPU name or grpc://host:port")
    p.add_argument("--scale", choices=tuple(SCALES), required=True)
    p.add_argument("--only", help=f"comma-separated tables: {','.join(TABLES)}")
    p.add_argument("--data_dir", help="benchmark data root (default: $BERT_DATA_DIR, else ./data)")
    p.add_argument("--output_dir", default="results", help="records and tables")
    p.add_argument("--work_dir", default="runs",
                   help="the CLIs' outputs: shards, checkpoints (large; not committed)")
    p.add_argument("--dry_run", action="store_true", help="print the plan and stop")
    p.add_argument("--quiet", action="store_true", help="do not echo the CLIs' output")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
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
    print("Asking the CLIs for their flags ...", flush=True)
    flags = cli_flags()
    for module, found in flags.items():
        if found is None:
            print(f"warning: python -m {module} --help failed: its runs are n/a", file=sys.stderr)
    plan = build_plan(args.scale, args.strategy, data_dir, args.work_dir, tables, args.tpu, flags)
    statuses = {k: run_status(r, load_record(args.output_dir, k), args.output_dir)
                for k, r in plan.runs.items()}
    print_plan(plan, statuses)
    if args.dry_run:
        return 0

    signal.signal(signal.SIGTERM, _stop_child)
    began = time.time()
    try:
        final = run_plan(plan, args.output_dir, data_dir, echo=not args.quiet)
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    from reproduce import tables as tables_module
    written = tables_module.build_tables(args.output_dir)
    counts = {}
    for status in final.values():
        counts[status] = counts.get(status, 0) + 1
    print(f"Done in {_duration(time.time() - began)}: "
          f"{', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}. "
          f"Wrote {len(written)} files to {os.path.join(args.output_dir, 'tables')}.")
    return 1 if counts.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
