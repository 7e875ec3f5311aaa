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

The estimates are the calibration machine's; on a slower one (`Speed`) a unit may outgrow
a sitting, and one begun there is lost with the machine. So `--units N` runs the units
that fit a sitting here first, in plan order, and the others after them, shortest first.
"""

import dataclasses
import sys
from typing import Optional

from reproduce.cost_model import CPU_EMULATED_BF16_SLOWDOWN, CPU_FLOAT32_MATMUL_PEAK_GFLOPS
from reproduce.plan import Plan
from reproduce.report import duration

SITTING_S = 2.5 * 3600  # one session on the 2-core machine, with room to commit
DONE = ("finished", "n/a")  # `reproduce.records.run_status` values that need no work


@dataclasses.dataclass(frozen=True)
class Speed:
    """This machine against the one the estimates were measured on."""
    peak_gflops: float  # float32 matmul peak (bert_tf.benchmark.matmul_peak_gflops)
    native_bfloat16: Optional[bool] = None  # bert_tf.provenance.native_bfloat16

    @property
    def factor(self) -> float:
        """How many times its estimate a fine-tuning run takes here: the ratio of the
        float32 matmul peaks, 1 within the spread of hosts with the calibration's CPU."""
        factor = CPU_FLOAT32_MATMUL_PEAK_GFLOPS / self.peak_gflops
        return 1.0 if 0.8 < factor < 1.25 else factor

    def seconds(self, run) -> float:
        """`run`'s estimate as it stands here. Pretraining is estimated in bfloat16, which
        a CPU without it runs in float32 at CPU_EMULATED_BF16_SLOWDOWN of the rate, however
        its peak compares (BERT-Tiny on an AVX-512 Xeon without BF16, peak 309 GFLOP/s,
        2026-12-06: 170 examples/s against the estimate's 321)."""
        if run.stage == "pretrain" and self.native_bfloat16 is False:
            return run.estimate_s / CPU_EMULATED_BF16_SLOWDOWN
        return run.estimate_s * self.factor

    @property
    def differs(self) -> bool:
        """Whether some estimate takes another time here."""
        return self.factor != 1.0 or self.native_bfloat16 is False


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


def units_to_do(plan: Plan, statuses: dict, count: int, speed: Optional[Speed] = None,
                shares_done: Optional[dict] = None) -> list:
    """`count` units that are not done: given this machine's `speed`, those whose rest
    (less `shares_done`, as in `print_units`) fits a sitting here first, in plan order,
    then the others, shortest here first (a unit that cannot end in a sitting is lost
    with the machine; the shortest is the likeliest to end)."""
    todo = [u for u in plan_units(plan) if unit_status(u, statuses) != "done"]
    if speed is not None:
        here = {u.name: _left(plan, u.run_ids, statuses, shares_done or {},
                              speed.seconds) or 0.0
                for u in todo}
        fits = [u for u in todo if here[u.name] <= SITTING_S]
        todo = fits + sorted((u for u in todo if u not in fits), key=lambda u: here[u.name])
    return todo[:count]


def next_units(plan: Plan, statuses: dict, count: int, speed: Optional[Speed] = None,
               shares_done: Optional[dict] = None) -> list:
    """[(name, plan)] of the `count` units `units_to_do` picks, each unit a plan of its
    own with the runs it needs from earlier units, to be run one after another: each unit
    then ends whole before the next begins. (One plan of them all would not: with --jobs > 1
    the runner starts the longest ready run first, which puts every unit's pretraining
    before any fine-tuning, so a sitting cut short would leave no unit done.)"""
    return [(u.name, plan.subset(u.run_ids))
            for u in units_to_do(plan, statuses, count, speed, shares_done)]


def print_units(plan: Plan, statuses: dict, speed: Optional[Speed] = None,
                out=None, shares_done: Optional[dict] = None) -> None:
    """One line per unit: status, estimate, runs and, given this machine's `speed`, what
    is left of it here; then the total and what the estimates mean here (`speed_note`).
    `shares_done`: {run_id: share of its estimate already done} of unfinished runs that
    go on from kept work (`reproduce.partial.shares_done`); what is left counts the rest."""
    out = out or sys.stdout
    shares_done = shares_done or {}
    units = plan_units(plan)
    print(f"Units (one sitting each, at most {duration(SITTING_S)} where the estimate "
          f"allows; `--units N` runs the next N, those that fit a sitting here first):",
          file=out)
    for i, unit in enumerate(units, 1):
        status = unit_status(unit, statuses)
        over = "  [longer than a sitting]" if (unit.estimate_s or 0) > SITTING_S else ""
        here = ""
        if speed is not None and status != "done" and speed.differs:
            left = _left(plan, unit.run_ids, statuses, shares_done, speed.seconds)
            here = f"  (left: ~{duration(left)} here)"
            if (left or 0) > SITTING_S:
                over = "  [longer than a sitting here]"
        print(f"  {i:3d}. {status:8s} {duration(unit.estimate_s):>6s}  "
              f"{unit.name} ({len(unit.run_ids)} runs){here}{over}", file=out)
    not_done = [u for u in units if unit_status(u, statuses) != "done"]
    remaining = [k for u in not_done for k in u.run_ids]
    left = _left(plan, remaining, statuses, shares_done, lambda run: run.estimate_s)
    print(f"Total: {len(units)} units, estimated {duration(_estimate(plan, list(plan.runs)))}; "
          f"{len(not_done)} not done, estimated {duration(left)}.", file=out)
    if speed is not None:
        print(speed_note(speed, _left(plan, remaining, statuses, shares_done, speed.seconds)),
              file=out)


def _left(plan: Plan, run_ids: list, statuses: dict, shares_done: dict,
          seconds) -> Optional[float]:
    """`seconds(run)` summed over the runs not done, less the shares done before."""
    runs = [plan.runs[k] for k in dict.fromkeys(run_ids)
            if statuses[k] not in DONE and not plan.runs[k].unavailable]
    if any(r.estimate_s is None for r in runs):
        return None
    return sum(seconds(r) * (1.0 - shares_done.get(r.run_id, 0.0)) for r in runs)


def speed_note(speed: Speed, left_s: Optional[float]) -> str:
    """The estimates are the calibration machine's; how long they take here (`Speed`):
    `left_s`, what is not done, in this machine's seconds."""
    note = (f"This machine: float32 matmul peak {speed.peak_gflops:.0f} GFLOP/s, against "
            f"{CPU_FLOAT32_MATMUL_PEAK_GFLOPS:.0f} where the estimates were measured")
    if not speed.differs:
        return note + "."
    pretraining = (f" (pretraining ~{1 / CPU_EMULATED_BF16_SLOWDOWN:.1f}x: this CPU emulates "
                   f"bfloat16)" if speed.native_bfloat16 is False else "")
    here = f"; what is not done: ~{duration(left_s)} here" if left_s else ""
    slower = ("; a unit that outgrows a sitting here is run after those that fit, and one "
              "cut short keeps each fine-tuning restart it finishes beside its record (commit "
              "it; reproduce.partial), while a pretraining run stopped part-way resumes on "
              "this machine only" if speed.factor > 1 or pretraining else "")
    return f"{note}: expect ~{speed.factor:.1f}x the estimated times{pretraining}{here}{slower}."
