"""The printed plan: one line per run (status, estimate, tables, settings) and totals."""

import sys
from typing import Optional

from reproduce.cost_model import (ACCELERATOR_ASSUMPTIONS, ACCELERATORS,
                                  accelerator_seconds, estimate_basis)
from reproduce.experiments import TABLES
from reproduce.plan import Plan, Run, mask_label
from reproduce.scales import SCALES


def duration(seconds: Optional[float]) -> str:
    """'7m', '3h32', or '?' where nothing is known."""
    if seconds is None:
        return "?"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h{minutes % 60:02d}" if minutes >= 60 else f"{minutes}m"


def _settings(run: Run) -> str:
    """One line of what matters about a run."""
    info = run.info
    if run.stage == "data":
        kind = "held-out" if info["heldout"] else f"dupe {run.config.dupe_factor}"
        masks = ("unmasked" if run.config.dynamic_masking
                 else f"mask {mask_label(info['mask_rates'])}")
        return (f"{info['objective']} {masks} {info['vocab']} "
                f"seq {info['max_seq_length']} {kind}")
    if run.stage == "pretrain":
        m = info["model"]
        masks = "dynamic masks " if run.config.dynamic_masking else ""
        return (f"{m['size']} {m['label']} {m['objective']} {masks}{m['steps']} x "
                f"{m['batch_size']} lr {run.config.learning_rate}")
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


def _total(estimates: list) -> Optional[float]:
    return None if None in estimates else sum(estimates)


def _summary(plan: Plan, statuses: dict, took: dict) -> str:
    """'To run: N runs, estimated T (per stage); finished F (took ..., estimated ...);
    n/a X. Estimates: ...'"""
    todo = [r for r in plan.runs.values() if statuses[r.run_id] in ("todo", "rerun", "changed")]
    by_stage = {}
    for run in todo:
        by_stage.setdefault(run.stage, []).append(run.estimate_s)
    parts = [f"{stage} {len(estimates)} runs {duration(_total(estimates))}"
             for stage, estimates in by_stage.items()]
    total = _total([r.estimate_s for r in todo])
    na = sum(s == "n/a" for s in statuses.values())
    done = sum(s == "finished" for s in statuses.values())
    timed = [k for k in took if plan.runs[k].estimate_s is not None]
    against = (f" (took {duration(sum(took[k] for k in timed))} by their records, on the "
               f"machines that ran them; estimated "
               f"{duration(sum(plan.runs[k].estimate_s for k in timed))})" if timed else "")
    return (f"To run: {len(todo)} runs, estimated {duration(total)} "
            f"({'; '.join(parts) or '-'}); finished {done}{against}; n/a {na}. "
            f"Estimates: {estimate_basis(plan.strategy)}")


def print_plan(plan: Plan, statuses: dict, took: Optional[dict] = None, out=None) -> None:
    """Every run with its status (`reproduce.records.run_status`), its estimate and, where
    it finished, the wall time its record gives (`took`: run_id -> seconds, on whatever
    machine ran it), then the totals."""
    took = took or {}
    out = out or sys.stdout
    scale = SCALES[plan.scale]
    print(f"Plan: scale {plan.scale} ({scale.description}), strategy {plan.strategy}, "
          f"{len(plan.runs)} runs", file=out)
    used = _used_by(plan)
    print(f"{'status':8s} {'est':>6s} {'took':>6s}  {'run':58s} {'tables':24s} settings",
          file=out)
    for run in plan.runs.values():
        tables = ",".join(t.replace("table", "T").replace("figure", "F")
                          for t in TABLES if t in used[run.run_id])
        note = f"  [{run.unavailable}]" if run.unavailable else ""
        estimate = "-" if run.unavailable else duration(run.estimate_s)
        wall = duration(took[run.run_id]) if run.run_id in took else "-"
        print(f"{statuses[run.run_id]:8s} {estimate:>6s} {wall:>6s}  {run.run_id:58s} "
              f"{tables:24s} {_settings(run)}{note}", file=out)
    print(_summary(plan, statuses, took), file=out)


def print_costs(plan: Plan, out=None) -> None:
    """Per table: the runnable runs and their estimated hours and dollars on each of
    `cost_model.ACCELERATORS`. A run several tables share counts under the first."""
    out = out or sys.stdout
    used, counted = _used_by(plan), set()
    names = list(ACCELERATORS)
    print("Estimated on accelerators (runnable runs; a shared run counts under the first "
          "table that needs it):", file=out)
    print(f"{'table':8s} {'runs':>5s}" + "".join(
        f" {ACCELERATORS[n].name + ' h':>14s} {'$':>9s}" for n in names), file=out)
    totals = {n: 0.0 for n in names}
    for table in TABLES:
        runs = [r for r in plan.runs.values() if table in used[r.run_id]
                and not r.unavailable and r.run_id not in counted]
        counted.update(r.run_id for r in runs)
        line = f"{table:8s} {len(runs):5d}"
        for n in names:
            seconds = sum(accelerator_seconds(r, n) or 0.0 for r in runs)
            totals[n] += seconds
            line += f" {seconds / 3600:14,.1f} {seconds / 3600 * ACCELERATORS[n].dollars_per_hour:9,.0f}"
        print(line, file=out)
    print(f"{'total':8s} {len(counted):5d}" + "".join(
        f" {totals[n] / 3600:14,.1f} {totals[n] / 3600 * ACCELERATORS[n].dollars_per_hour:9,.0f}"
        for n in names), file=out)
    print(ACCELERATOR_ASSUMPTIONS, file=out)
