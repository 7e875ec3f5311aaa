"""Side-by-side timing for the benchmarks (`benchmark`, `pretrain_benchmark`).

On a machine shared with other jobs one timing says little. So every round runs each
contender once, in an order rotated by one place each round (no contender always runs
first, or always after the same neighbour), and the results are per-round medians with
their spread. A ratio of two contenders' medians gets a bootstrap interval: whole rounds
are resampled, so each resample keeps the contenders that ran side by side together.
`header` says what ran where (command, commit, date, machine, load), so a printed
result can be traced and rerun.

`startup_seconds` and `Stages` time one process's own stages. They live here, free of
TensorFlow, so that the Hugging Face recipe of `glue_suite.benchmark` can time its stages
the same way without TensorFlow's import landing in its start-up.
"""

import contextlib
import os
import statistics
import sys
import time

import numpy as np

from bert_tf import portable_paths, provenance


def startup_seconds() -> float:
    """Seconds since this process started: interpreter start-up and imports, when called
    first thing.

    On Linux, the kernel's boot-relative clock less the process's start tick (1/100 s):
    psutil's `create_time` adds that tick to the boot time, which /proc/stat gives in whole
    seconds, and so overstates a process's age by up to a second.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start_tick = int(stat.read().rpartition(")")[2].split()[19])  # field 22
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_tick / os.sysconf("SC_CLK_TCK")
        if 0 <= age < 86400:  # a container whose clocks disagree falls back to psutil
            return age
    except (OSError, AttributeError, ValueError):  # not Linux
        pass
    import psutil  # only here: the benchmarks' other helpers do without it
    return time.time() - psutil.Process().create_time()


class Stages:
    """Seconds per named stage; a stage entered twice adds up."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began


def rotated(names: list, round_index: int) -> list:
    """`names` rotated left by `round_index` places."""
    shift = round_index % len(names)
    return names[shift:] + names[:shift]


def measured_rounds(contenders: dict, rounds: int, log=print) -> dict:
    """{name: zero-argument callable that returns the seconds it measured (of a part of
    its work: a trace, a build)} -> {name: [seconds per round]}, the order rotated every
    round."""
    names, seconds = list(contenders), {name: [] for name in contenders}
    for r in range(rounds):
        for name in rotated(names, r):
            seconds[name].append(contenders[name]())
        log(f"round {r + 1}/{rounds}: " + "  ".join(
            f"{name} {seconds[name][-1]:.3f}s" for name in names))
    return seconds


def run_rounds(contenders: dict, rounds: int, log=print) -> dict:
    """{name: zero-argument callable that runs and waits} -> {name: [seconds per round]}."""
    def timed(run):
        def call():
            start = time.perf_counter()
            run()
            return time.perf_counter() - start
        return call
    return measured_rounds({name: timed(run) for name, run in contenders.items()}, rounds, log)


def spread(values: list) -> tuple:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def bootstrap_ratio(numerator: list, *denominators: list, resamples: int = 4000,
                    level: float = 0.95, seed: int = 0) -> tuple:
    """Per-round values of contenders that ran side by side -> (median(numerator) over
    the highest median of the denominators, low, high): the ratio and the interval a
    percentile bootstrap over rounds gives at `level` (the best denominator is chosen
    anew in every resample)."""
    values = np.asarray([numerator, *denominators], float)  # [1 + D, rounds]
    if values.ndim != 2 or len(values) < 2:
        raise ValueError("a numerator and at least one denominator, with the same rounds")
    rows = np.random.default_rng(seed).integers(0, values.shape[1],
                                                (resamples, values.shape[1]))
    medians = np.median(values[:, rows], axis=2)  # [1 + D, resamples]
    ratios = medians[0] / medians[1:].max(axis=0)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    full = np.median(values, axis=1)
    return float(full[0] / full[1:].max()), float(low), float(high)


def header(program: str) -> list:
    """Lines that say what ran: the command, commit, date, machine (`provenance.stamp`),
    then the load and threads."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    threads = {name: os.environ.get(name) for name in
               ("OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS",
                "TF_ENABLE_ONEDNN_OPTS") if os.environ.get(name) is not None}
    command = portable_paths.command_line(program, sys.argv[1:],
                                          os.environ.get(portable_paths.DATA_DIR_VAR))
    return [*provenance.stamp_lines(provenance.stamp(command)),
            f"load average at start (1, 5, 15 min): {load}"
            + (f"; {threads}" if threads else "")]
