"""What a run ran on: CPU model, cores, memory, GPUs, library versions and git commit.

Cheap to call (no TensorFlow import: versions come from package metadata), so the
harness can stamp every run record with it. `stamp` is the one provenance of an output
that has no run record (a benchmark's): command, commit, date and machine.
"""

import datetime
import functools
import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = ("tensorflow", "tensorflow-text", "keras", "numpy", "pandas")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> set:
    """The instruction-set flags of /proc/cpuinfo (empty where there is none)."""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# The widest matrix / vector instructions, widest first: what sets a CPU's speed here.
# Two machines of the same model name ("AMD EPYC") differed by 2x in pretraining speed.
_ISAS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"), ("avx512f", "AVX-512"),
         ("avx2", "AVX2"))


def cpu_isa() -> Optional[str]:
    """"AMX", "AVX-512 BF16", "AVX-512", "AVX2"; None where the flags are unknown."""
    flags = cpu_flags()
    return next((name for flag, name in _ISAS if flag in flags), None)


def native_bfloat16() -> Optional[bool]:
    """Whether the CPU multiplies bfloat16 in hardware (AMX or AVX-512 BF16); None where
    the flags are unknown. Without it oneDNN emulates bfloat16 and mixed_bfloat16 is
    slower than float32: BERT-Tiny pretraining 0.72x on a 2-core AVX2 EPYC, against 1.13x
    faster on an AVX-512 BF16 one (bert_tf.pretrain_benchmark, 2026-11-25 and -27)."""
    isa = cpu_isa()
    return None if isa is None else isa in ("AMX", "AVX-512 BF16")


def memory_gib() -> Optional[float]:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 1)  # kB -> GiB
    return None


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpus() -> list:
    """GPU names from nvidia-smi, [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def package_versions() -> dict:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(repo: str = REPO) -> dict:
    """The code a run ran: {"commit", "dirty", "changed_files", "diff_sha256"}.

    Dirty when tracked files outside results/ have local changes (the harness itself
    rewrites results/ while it runs); then `changed_files` names them and `diff_sha256`
    identifies their uncommitted diff, so a record says which edits it ran with. None
    values where git is unavailable.
    """
    def git(*args):
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                              timeout=20)
    unknown = {"commit": None, "dirty": None, "changed_files": None, "diff_sha256": None}
    outside_results = ("--", ".", ":(exclude)results")
    try:
        head = git("rev-parse", "HEAD")
        changed = git("diff", "HEAD", "--name-only", *outside_results)
        diff = git("diff", "HEAD", "--binary", *outside_results)
    except (OSError, subprocess.TimeoutExpired):
        return unknown
    if head.returncode or changed.returncode or diff.returncode:
        return unknown
    files = changed.stdout.split()
    return {"commit": head.stdout.strip(), "dirty": bool(files), "changed_files": files,
            "diff_sha256": hashlib.sha256(diff.stdout.encode()).hexdigest() if files else None}


def uncommitted(git: dict, named: int = 10) -> str:
    """What a `git_commit()` ran beyond its commit, in words: 'uncommitted changes to
    a.py, b.py (diff sha256 0123456789ab)', the first `named` files by name; "" where
    the tree was clean (or git unknown)."""
    if not git.get("dirty"):
        return ""
    changed = git.get("changed_files") or []
    files = ", ".join(changed[:named]) + (f" and {len(changed) - named} more"
                                          if len(changed) > named else "")
    diff = f" (diff sha256 {git['diff_sha256'][:12]})" if git.get("diff_sha256") else ""
    return f"uncommitted changes to {files}{diff}"


def code_text(git: dict) -> str:
    """The code a `git_commit()` names, in words: 'abc123 + uncommitted changes to ...'."""
    changes = uncommitted(git)
    return (git.get("commit") or "unknown") + (f" + {changes}" if changes else "")


def stamp(command: str) -> dict:
    """What ran, from which code, when and where: {"command", "git", "date" (UTC, ISO
    8601), "machine"}, the head of every benchmark's output."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"command": command, "git": git_commit(), "date": now, "machine": describe()}


def stamp_lines(values: dict) -> list:
    """A `stamp` as the lines a printed result starts with."""
    return [f"command: {values['command']}",
            f"commit:  {code_text(values['git'])}",
            f"date:    {values['date']}",
            f"machine: {summary(values['machine'])}"]


@functools.lru_cache(maxsize=1)
def describe() -> dict:
    """The machine and software, as stored in every run record."""
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_cores": usable_cores(),
        "host_cpus": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpus": gpus(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
    }


def summary(hw: dict) -> str:
    """One line for tables and READMEs: 'Intel Xeon ... x2 cores, 23.4 GiB, TF 2.20.0'."""
    gpu = f", {len(hw['gpus'])}x {hw['gpus'][0]}" if hw.get("gpus") else ""
    tf = (hw.get("packages") or {}).get("tensorflow")
    isa = f" ({hw['cpu_isa']})" if hw.get("cpu_isa") else ""
    return (f"{hw.get('cpu')}{isa} x{hw.get('cpu_cores')} cores, {hw.get('memory_gib')} GiB"
            f"{gpu}, TF {tf}")


if __name__ == "__main__":
    import json
    print(json.dumps({**describe(), "git": git_commit()}, indent=2))
