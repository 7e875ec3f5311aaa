"""Executes a plan: each unfinished run as a CLI subprocess, in dependency order.

For each run of a `reproduce.plan.Plan` the runner decides from its record
(`reproduce.records.run_status`) whether to skip it, record it as n/a or blocked, or run
`python -m <module> <argv>`; it streams the output to the record's log.txt, copies the
run's small outputs beside the record (results/ stands alone, with the benchmark data
for the gold labels) and writes the record.
The log and the record are committed, so the paths in both are portable
(`bert_tf.portable_paths`); the terminal sees the output as it is.
"""

import concurrent.futures
import dataclasses
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

from bert_tf import files, portable_paths, provenance
from glue_suite import predictions
from glue_suite.tasks import get_task
from reproduce import partial
from reproduce.plan import Plan, Run
from reproduce.records import (base_record, load_record, now, record_path, run_files_dir,
                               run_status, write_record)
from reproduce.report import duration

# Small outputs copied next to the record (globs relative to the run's output directory).
KEEP = {
    "data": ("metadata.json",),
    "pretrain": ("metrics.csv", "eval_results.json", "pretrain_config.json",
                 "heldout_losses.tsv"),
    # restarts/lr*: every restart's dev predictions, for the bootstrap intervals of
    # reproduce.statistics. The gold labels beside them (restarts/gold) are the
    # benchmark's own: not copied; the record holds their digest (`gold_digests`).
    "finetune": ("metrics.json", "*_predictions.tsv", "predictions.json", "null_odds.json",
                 "submission/*.tsv", "restarts/lr*/*"),
}
RESULT_FILE = {"data": "metadata.json", "pretrain": "eval_results.json",
               "finetune": "metrics.json"}


# --------------------------------------------------------------------- file system
class _Files:
    """os / glob for local paths; tf.io.gfile for remote ones (gs://, for TPUs), imported
    only then, so that the harness itself stays free of TensorFlow."""

    @staticmethod
    def _gfile(path: str):
        if not files.is_remote(path):
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
    def exists(cls, path: str) -> bool:
        gfile = cls._gfile(path)
        return gfile.exists(path) if gfile else os.path.exists(path)

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


# ------------------------------------------------------------------ subprocesses
def _child_env(data_dir: Optional[str]) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if data_dir:
        env[portable_paths.DATA_DIR_VAR] = data_dir
    return env


class _Children:
    """The running CLIs, so that SIGTERM / Ctrl-C stop them before the harness exits."""
    processes: set = set()


def stop_child(signum, frame):
    """SIGTERM handler: stops the running CLIs, then interrupts the harness. A
    pretraining CLI first finishes its running step and saves it (`bert_tf.cli.StopSignals`):
    a few seconds here, longer for a large model's step, hence the patient wait."""
    for process in list(_Children.processes):
        if process.poll() is None:
            process.terminate()
    for process in list(_Children.processes):
        try:
            process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
    raise KeyboardInterrupt(f"signal {signum}")


class _PortableLog:
    """A log file written with portable paths, a line at a time: a path that two reads
    split is still rewritten whole. (A progress bar's "\r" ends a line too, so a bar
    reaches the file as it redraws.)"""

    def __init__(self, log, data_dir: Optional[str]):
        self.log, self.data_dir, self.pending = log, data_dir, b""

    def write(self, chunk: bytes) -> None:
        text = self.pending + chunk
        end = max(text.rfind(b"\n"), text.rfind(b"\r")) + 1
        self.pending = text[end:]
        self._write(text[:end])

    def close(self) -> None:
        self._write(self.pending)
        self.pending = b""

    def _write(self, data: bytes) -> None:
        if data:
            text = data.decode("utf-8", "surrogateescape")
            self.log.write(portable_paths.portable_text(text, self.data_dir)
                           .encode("utf-8", "surrogateescape"))
            self.log.flush()


def _stream(module: str, argv: list, log_path: str, env: dict, echo: bool,
            data_dir: Optional[str], on_output: Callable[[], None] = lambda: None) -> int:
    """Runs `python -m module argv`, appending its output to log_path (and echoing it);
    returns its exit status. `data_dir`: the plan's, for the log's paths; `on_output`:
    called after each piece of output."""
    with open(log_path, "ab") as log:
        header = portable_paths.command_line(module, argv, data_dir)
        log.write(f"\n=== {now()} {header}\n".encode())
        log.flush()
        portable_log = _PortableLog(log, data_dir)
        process = subprocess.Popen([sys.executable, "-m", module, *argv],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        _Children.processes.add(process)
        try:
            while True:
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                portable_log.write(chunk)
                if echo:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
                on_output()
            return process.wait()
        finally:
            portable_log.close()
            _Children.processes.discard(process)


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


def _failure_reason(returncode: int, tail: str) -> str:
    """Why a run's CLI ended with `returncode` != 0. Killed by a signal it does not handle
    (negative status), its log's last line is whatever it printed before, not a cause."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"exit {returncode}: killed by {name}"
    return f"exit {returncode}: {_error_line(tail)}"


def _error_line(tail: str) -> str:
    """The most telling line of a failed run's output."""
    lines = tail.splitlines()
    for pattern in (r"^error: ", r"^stopped by ", r"Error\b", r"ERROR"):
        for line in reversed(lines):
            if re.search(pattern, line):
                return line.strip()[:300]
    return (lines[-1].strip()[:300] if lines else "no output")


# ------------------------------------------------------------------------ outputs
def _copy_outputs(run: Run, files_dir: str) -> list:
    """Copies the run's small outputs (`KEEP`) under files_dir; returns their paths."""
    copied = []
    for pattern in KEEP[run.stage]:
        for path in _Files.glob(os.path.join(run.out_dir, pattern)):
            relative = path[len(run.out_dir):].lstrip("/")
            target = os.path.join(files_dir, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _Files.copy(path, target)
            copied.append(relative)
    return copied


def gold_digests(out_dir: str, task: str) -> dict:
    """{split: predictions.gold_digest} of the gold labels a fine-tuning run wrote beside
    its restarts (read through a local copy: out_dir may be gs://)."""
    spec = get_task(task)
    digests = {}
    with tempfile.TemporaryDirectory() as local:
        for split in spec.eval_splits:
            source = predictions.gold_path(spec, split, out_dir)
            if _Files.exists(source):
                target = predictions.gold_path(spec, split, local)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                _Files.copy(source, target)
                digests[split] = predictions.gold_digest(predictions.read_gold(spec, split, local))
    return digests


def _collect(run: Run, files_dir: str) -> tuple:
    """(metrics, result, copied files) from the run's output directory."""
    result = json.loads(_Files.read(os.path.join(run.out_dir, RESULT_FILE[run.stage])))
    copied = _copy_outputs(run, files_dir)
    if run.stage == "finetune":
        metrics = result["metrics"]
        result = {k: v for k, v in result.items() if k != "hardware"}
    elif run.stage == "pretrain":
        metrics = result
        exports = run.config.export_steps if run.config is not None else ()
        missing = [step for step in exports
                   if not _Files.isdir(os.path.join(run.out_dir, f"export_{step}"))]
        if not _Files.isdir(os.path.join(run.out_dir, "export")) or missing:
            raise FileNotFoundError(
                f"{run.out_dir}: no export/ or export_<step>/ for steps {missing}")
    else:
        metrics = {k: result.get(k) for k in ("num_instances", "instances_per_second",
                                               "peak_rss_mb", "seconds")}
        result = {k: v for k, v in result.items() if k != "shards"}
    return metrics, result, copied


def _outputs_present(run: Run) -> bool:
    """Whether what later runs read from a finished run is still in its directory."""
    if run.stage == "data":
        return _Files.exists(os.path.join(run.out_dir, "metadata.json"))
    if run.stage == "pretrain":
        steps = run.config.export_steps if run.config is not None else ()
        return all(_Files.isdir(os.path.join(run.out_dir, name))
                   for name in ["export"] + [f"export_{step}" for step in steps])
    return True  # no run reads a fine-tuning run's outputs


def outputs_to_remake(plan: Plan, output_dir: str) -> dict:
    """{run_id: "restore" | "rerun"} for finished runs whose outputs are gone (another
    machine, a cleaned work dir) while a run of the plan that is not finished reads them.

    Data runs are deterministic: "restore" runs the command again and checks it made
    what the record says, leaving the record (and so every run made from it) as it is.
    A pretraining run is not bit-reproducible: "rerun" pretrains again, and the runs
    made from its old model become "changed" and are redone (`reproduce.units`).
    """
    status = {k: run_status(r, load_record(output_dir, k), output_dir, plan.data_dir)
              for k, r in plan.runs.items()}
    remake, grew = {}, True
    while grew:  # a pretraining run redone needs its data again, and so on
        grew = False
        for run_id in [k for k, s in status.items() if s not in ("finished", "n/a") or k in remake]:
            for need in plan.runs[run_id].needs:
                run = plan.runs[need]
                if need not in remake and status[need] == "finished" and not _outputs_present(run):
                    remake[need] = "restore" if run.stage == "data" else "rerun"
                    grew = True
    return remake


def restore(run: Run, plan: Plan, output_dir: str, data_dir: str, echo: bool) -> str:
    """Reruns a finished data run's command to get its shards back; "finished" if it
    made as many instances as the record says, else "failed" (the record is kept)."""
    record = load_record(output_dir, run.run_id)
    log_path = os.path.join(os.path.dirname(record_path(output_dir, run.run_id)), "log.txt")
    returncode = _stream(run.module, run.args, log_path, _child_env(data_dir), echo,
                         plan.data_dir)
    try:
        made = json.loads(_Files.read(os.path.join(run.out_dir, RESULT_FILE["data"])))
    except (OSError, ValueError):
        made = {}
    recorded = (record.get("metrics") or {}).get("num_instances")
    if returncode == 0 and made.get("num_instances") == recorded:
        return "finished"
    print(f"--- {run.run_id}: restoring its outputs failed (exit {returncode}; "
          f"{made.get('num_instances')} instances, the record says {recorded})", flush=True)
    return "failed"


# ------------------------------------------------------------------------ running
def executed_argv(run: Run) -> tuple:
    """The flags a run executes with: the plan's, except
    - --overwrite for a fine-tuning run whose directory already holds a finished run (the
      harness stopped between the CLI's end and the record, or the record was removed):
      glue_suite.run refuses such a directory otherwise. Its outputs move to
      previous-<time>/ there.
    - float32 for pretraining planned in mixed_bfloat16 on a CPU that emulates bfloat16
      (`_precision_for_this_cpu`).
    The record keeps the planned argv, which decides whether the run is done: a plan
    continued on another kind of machine keeps the runs it has."""
    if run.config is None:
        return run.args
    finished = _Files.exists(os.path.join(run.out_dir, RESULT_FILE[run.stage]))
    if run.stage == "finetune" and finished:
        return dataclasses.replace(run.config, overwrite=True).argv()
    if run.stage == "pretrain":
        here = _precision_for_this_cpu(run.config)
        return run.args if here is run.config else here.argv()
    return run.args


def _precision_for_this_cpu(command):
    """The command at float32 where the recipe says mixed_bfloat16 (the fastest on CPUs
    with AMX or AVX-512 BF16) and this CPU has neither: there bfloat16 is emulated and
    slower than float32 (`provenance.native_bfloat16`). A run already started resumes at
    the precision it started with (its pretrain_config.json), which pretrain requires."""
    d = command.distribution
    if d.strategy != "cpu" or d.precision != "mixed_bfloat16" or \
            provenance.native_bfloat16() is not False:
        return command
    started = os.path.join(command.model_dir, "pretrain_config.json")
    if _Files.exists(started) and json.loads(_Files.read(started)).get("precision") == \
            d.precision:
        return command
    return dataclasses.replace(command,
                               distribution=dataclasses.replace(d, precision="float32"))


def execute(run: Run, plan: Plan, output_dir: str, data_dir: str, echo: bool = True) -> dict:
    """Runs one CLI and writes its record (status "running" first, then the outcome)."""
    record = base_record(run, plan)
    record_dir = os.path.dirname(record_path(output_dir, run.run_id))
    os.makedirs(record_dir, exist_ok=True)
    started = time.time()
    argv = executed_argv(run)
    if argv != run.args:
        record["executed_argv"] = list(argv)
    record.update(status="running", started=now(), git=provenance.git_commit(),
                  hardware=provenance.describe(), log="log.txt",
                  needs_ended={n: (load_record(output_dir, n) or {}).get("ended")
                               for n in run.needs})
    write_record(output_dir, record, plan.data_dir)
    _Files.makedirs(run.out_dir)
    log_path = os.path.join(record_dir, "log.txt")
    returncode, adopted = _run_cli(run, plan, argv, load_record(output_dir, run.run_id),
                                   log_path, data_dir, echo)
    record.update(returncode=returncode, ended=now(),
                  wall_seconds=round(time.time() - started, 1))
    tail = _tail(log_path)
    if returncode != 0:
        record.update(status="failed", reason=_failure_reason(returncode, tail), log_tail=tail)
    else:
        try:
            metrics, result, copied = _collect(run, run_files_dir(output_dir, run.run_id))
            record.update(status="finished", metrics=metrics, result=result)
            record["outputs"]["files"] = copied
            if run.stage == "finetune":
                record["outputs"]["gold_sha256"] = gold_digests(run.out_dir, result["task"])
        except (OSError, KeyError, ValueError) as e:
            record.update(status="failed", reason=f"outputs missing: {e}", log_tail=tail)
    if adopted:
        record["adopted_restarts"] = adopted
    write_record(output_dir, record, plan.data_dir)
    if record["status"] == "finished":
        partial.remove(record_dir)
    return record


def _run_cli(run: Run, plan: Plan, argv: tuple, started: dict, log_path: str,
             data_dir: str, echo: bool) -> tuple:
    """(exit status, restarts adopted) of the run's CLI; `started`: its record as written
    when it started (paths portable), log.txt beside it. A fine-tuning run first gets the
    restarts kept from earlier sittings, and keeps each one it finishes beside its record
    as it goes (`reproduce.partial`; local runs)."""
    record_dir = os.path.dirname(log_path)
    command = (run.module, argv, log_path, _child_env(data_dir), echo, plan.data_dir)
    if run.stage != "finetune" or files.is_remote(run.out_dir):
        return _stream(*command), {}
    adopted = partial.adopt(run, argv, record_dir, started)
    saver = partial.Saver(run, record_dir, started)
    try:
        return _stream(*command, on_output=saver), adopted
    finally:
        saver.save()  # also when stopped: what it finished is kept


def _relabel(run: Run, plan: Plan, record: dict, output_dir: str) -> None:
    """A finished run whose cells, tables or info the plan now files differently: same
    run, new labels."""
    base = json.loads(files.json_text(base_record(run, plan)))  # as the record holds it
    if any(record.get(k) != base[k] for k in ("cells", "tables", "info")):
        write_record(output_dir, {**record, **{k: base[k] for k in ("cells", "tables", "info")}},
                     plan.data_dir)


def _record_unavailable(run: Run, plan: Plan, record: Optional[dict], output_dir: str) -> None:
    # Rewritten only when the reason changes, so a re-run leaves results/ clean.
    known = (record or {}).get("status"), (record or {}).get("reason")
    if known != ("unavailable", run.unavailable):
        write_record(output_dir, {**base_record(run, plan), "status": "unavailable",
                                  "reason": run.unavailable, "ended": now()}, plan.data_dir)


def _start(run: Run, plan: Plan, status: str, output_dir: str, data_dir: str,
           echo: bool) -> str:
    """Runs a todo / rerun / changed / restore run; returns its final status."""
    if status == "restore":
        print(f"--- {run.run_id}: finished, but its outputs are gone: making them again "
              f"({run.command})", flush=True)
        return restore(run, plan, output_dir, data_dir, echo)
    if status == "changed" and _Files.isdir(run.out_dir):
        # Its outputs (checkpoints above all) belong to another command: set aside,
        # not deleted, in case the change was a mistake.
        aside = f"{run.out_dir}.old-{time.strftime('%Y%m%d-%H%M%S')}"
        print(f"--- {run.run_id}: command changed; moving {run.out_dir} to {aside}",
              flush=True)
        _Files.set_aside(run.out_dir, aside)
    executed = shlex.join(["python", "-m", run.module, *executed_argv(run)])
    print(f"--- {run.run_id} ({'resuming' if status == 'rerun' else 'starting'}, "
          f"estimated {duration(run.estimate_s)}): {executed}", flush=True)
    record = execute(run, plan, output_dir, data_dir, echo)
    summary = ", ".join(f"{k} {v:.4g}" for k, v in (record.get("metrics") or {}).items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool))
    print(f"--- {run.run_id}: {record['status']} in {duration(record['wall_seconds'])}"
          f"{' ' + record.get('reason', '') if record['status'] != 'finished' else ''}"
          f"{': ' + summary[:300] if summary else ''}", flush=True)
    return record["status"]


def _settle(run: Run, plan: Plan, final: dict, output_dir: str, remake: dict) -> tuple:
    """(final status, None) for a run that needs no process (finished, n/a, blocked by a
    run it needs); (None, its run_status or `remake`'s word) for one that must run."""
    record = load_record(output_dir, run.run_id)
    status = remake.get(run.run_id) or run_status(run, record, output_dir, plan.data_dir)
    blocked = [n for n in run.needs if final.get(n) != "finished"]
    if status == "finished":
        _relabel(run, plan, record, output_dir)
        return "finished", None
    if status == "n/a":
        _record_unavailable(run, plan, record, output_dir)
        return "unavailable", None
    if blocked:
        reason = f"needs {blocked[0]} ({final.get(blocked[0], 'not run')})"
        write_record(output_dir, {**base_record(run, plan), "status": "blocked",
                                  "reason": reason, "ended": now()}, plan.data_dir)
        print(f"--- {run.run_id}: blocked, {reason}", flush=True)
        return "blocked", None
    return None, status


def _runs_alone(run: Run) -> bool:
    # Pretraining uses every core and, for BERT-Large, most of the memory (~16 GB at
    # 512 tokens on this CPU): it never shares the machine with another run.
    return run.stage == "pretrain"


def run_plan(plan: Plan, output_dir: str, data_dir: str, echo: bool = True,
             jobs: int = 1) -> dict:
    """Runs every unfinished run of the plan, each once the runs it needs ended, in plan
    order; returns {run_id: status}.

    jobs: how many runs at once. Short runs are dominated by single-threaded start-up
    (imports, model build, tracing), so two at a time nearly halve a rehearsal on two
    cores; pretraining runs alone (`_runs_alone`). With jobs > 1 the runs that may start
    go longest estimate first, so that a long run does not begin last and end a sitting
    alone on a core, and the CLIs' output goes to their logs only, not interleaved on the
    terminal.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    final, pending, running = {}, list(plan.runs.values()), {}
    remake = outputs_to_remake(plan, output_dir)
    waits = lambda run: any(n in plan.runs and n not in final for n in run.needs)
    echo = echo and jobs == 1
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        while pending or running:
            ready = [r for r in pending if not waits(r)]
            if jobs > 1:  # sorted() is stable: equal estimates keep plan order
                ready = sorted(ready, key=lambda r: -(r.estimate_s or 0.0))
            for run in ready:
                settled, status = _settle(run, plan, final, output_dir, remake)
                if settled is None:
                    alone = _runs_alone(run) or any(map(_runs_alone, running.values()))
                    if len(running) >= jobs or (alone and running):
                        break  # no run overtakes one that waits for a slot
                    running[pool.submit(_start, run, plan, status, output_dir, data_dir,
                                        echo)] = run
                else:
                    final[run.run_id] = settled
                pending.remove(run)
            if running:
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    final[running.pop(future).run_id] = future.result()
    return {run_id: final[run_id] for run_id in plan.runs}
