"""Sittings: a plan cut into units that each finish in one sitting on one machine.

A pretraining run's checkpoints and exports live in the work dir, which may not survive
a move to another machine (a fresh CI clone, the next session's machine); its records
do, being committed. So a pretraining run and every run that reads its exports form one
unit, which is run to its end in one sitting: `python -m reproduce.all --units 1` runs
the next unfinished unit and stops, and a plain rerun of the same command on any machine
goes on with the one after. Where a unit was cut short and its exports are gone, the
runner pretrains again and redoes the unit's fine-tuning (`reproduce.runner`; the
records then describe the model that exists). Data runs are deterministic, so their
shards are rewritten where a later unit needs them (same command, same bytes), without
invalidating what was made from them.

Units, in plan order: each pretraining run with the data runs it is the first to need
and the runs that read its exports; the remaining runs (fine-tuning the shipped
checkpoint) packed in plan order into units of at most `SITTING_S` estimated seconds.
"""

import dataclasses
import sys
from typing import Optional

from reproduce.cost_model import CPU_FLOAT32_MATMUL_PEAK_GFLOPS
from reproduce.plan import Plan
from reproduce.report import duration

SITTING_S = 2.5 * 3600  # one session on the 2-core machine, with room to commit
DONE = ("finished", "n/a")  # `reproduce.records.run_status` values that need no work


@dataclasses.dataclass
class Unit:
    """Runs done together in one sitting."""
    name: str
    run_ids: list
    estimate_s: Optional[float]


def _estimate(plan: Plan, run_ids: list) -> Optional[float]:
    estimates = [plan.runs[k].estimate_s for k in run_ids if not plan.runs[k].unavailable]
    return None if None in estimates else sum(estimates)


def plan_units(plan: Plan) -> list:
    """The plan's units, in plan order (see the module docstring)."""
    placed, units = set(), []
    for run in plan.runs.values():
        if run.stage != "pretrain":
            continue
        ids = [n for n in run.needs if n not in placed] + [run.run_id]
        ids += [k for k, r in plan.runs.items() if run.run_id in r.needs]
        placed.update(ids)
        units.append(Unit(run.run_id.split(".", 2)[-1], ids, _estimate(plan, ids)))
    batches = [[]]
    for run_id in [k for k in plan.runs if k not in placed]:
        if batches[-1] and (_estimate(plan, batches[-1] + [run_id]) or 0.0) > SITTING_S:
            batches.append([])
        batches[-1].append(run_id)
    units += [Unit(f"shipped checkpoint, fine-tuning part {i}", ids, _estimate(plan, ids))
              for i, ids in enumerate(filter(None, batches), 1)]
    return units


def unit_status(unit: Unit, statuses: dict) -> str:
    """done | partial | todo."""
    done = [statuses[k] in DONE for k in unit.run_ids]
    return "done" if all(done) else "partial" if any(
        statuses[k] == "finished" for k in unit.run_ids) else "todo"


def units_to_do(plan: Plan, statuses: dict, count: int) -> list:
    """The plan's first `count` units that are not done."""
    return [u for u in plan_units(plan) if unit_status(u, statuses) != "done"][:count]


def next_units(plan: Plan, statuses: dict, count: int) -> list:
    """[(name, plan)] of the plan's first `count` units that are not done, each unit a
    plan of its own with the runs it needs from earlier units, to be run one after
    another: each unit then ends whole before the next begins. (One plan of them all would
    not: with --jobs > 1 the runner starts the longest ready run first, which puts every
    unit's pretraining before any fine-tuning, so a sitting cut short would leave no unit
    done.)"""
    return [(u.name, plan.subset(u.run_ids)) for u in units_to_do(plan, statuses, count)]


def print_units(plan: Plan, statuses: dict, peak_gflops: Optional[float] = None,
                out=None, shares_done: Optional[dict] = None) -> None:
    """One line per unit: status, estimate, runs; then the total and, given this
    machine's float32 matmul peak, what the estimates mean here (`speed_note`).
    `shares_done`: {run_id: share of its estimate already done} of unfinished runs that
    go on from kept work (`reproduce.partial.shares_done`); what is left counts the rest."""
    out = out or sys.stdout
    units = plan_units(plan)
    print(f"Units (one sitting each, at most {duration(SITTING_S)} where the estimate "
          f"allows; `--units N` runs the next N):", file=out)
    for i, unit in enumerate(units, 1):
        over = "  [longer than a sitting]" if (unit.estimate_s or 0) > SITTING_S else ""
        print(f"  {i:3d}. {unit_status(unit, statuses):8s} {duration(unit.estimate_s):>6s}  "
              f"{unit.name} ({len(unit.run_ids)} runs){over}", file=out)
    remaining = [u for u in units if unit_status(u, statuses) != "done"]
    left = _estimate(plan, [k for u in remaining for k in u.run_ids if statuses[k] not in DONE])
    if left is not None:
        left -= sum(plan.runs[k].estimate_s * share for k, share in (shares_done or {}).items()
                    if statuses[k] not in DONE)
    print(f"Total: {len(units)} units, estimated {duration(_estimate(plan, list(plan.runs)))}; "
          f"{len(remaining)} not done, estimated {duration(left)}.", file=out)
    if peak_gflops:
        print(speed_note(peak_gflops, left), file=out)


def speed_note(peak_gflops: float, left_s: Optional[float]) -> str:
    """The estimates are the calibration machine's; how long they take here follows the
    ratio of the two float32 matmul peaks (`cost_model.CPU_FLOAT32_MATMUL_PEAK_GFLOPS`)."""
    factor = CPU_FLOAT32_MATMUL_PEAK_GFLOPS / peak_gflops
    note = (f"This machine: float32 matmul peak {peak_gflops:.0f} GFLOP/s, against "
            f"{CPU_FLOAT32_MATMUL_PEAK_GFLOPS:.0f} where the estimates were measured")
    if 0.8 < factor < 1.25:  # within the spread of hosts with the calibration's CPU
        return note + "."
    here = f"; what is not done: ~{duration(left_s * factor)} here" if left_s else ""
    slower = ("; a unit may then outgrow a sitting: a fine-tuning run keeps each restart "
              "it finishes beside its record (commit it; reproduce.partial), a pretraining "
              "run stopped part-way resumes on this machine only" if factor > 1 else "")
    return f"{note}: expect ~{factor:.1f}x the estimated times{here}{slower}."
