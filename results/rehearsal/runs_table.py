"""runs.tsv: one row per run of a rehearsal, from the runs' own records.

    python results/rehearsal/runs_table.py runs/rehearsal/results/runs > results/rehearsal/runs.tsv

Columns: run_id, status, wall seconds, the reason of a run that did not finish, and the
caps the rehearsal put on it (flag=planned->rehearsed; paths relative to the rehearsal's
work dir, `reproduce.rehearsal.WORK_DIR`).
"""

import glob
import json
import os
import sys

from reproduce import rehearsal

HEADER = ("run_id", "status", "wall_seconds", "reason",
          "caps (planned->rehearsed; paths relative to the rehearsal work dir)")


def _relative(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace(rehearsal.WORK_DIR + os.sep, "")


def row(record: dict) -> tuple:
    caps = ",".join(f"{flag}={_relative(planned)}->{_relative(capped)}"
                    for flag, (planned, capped) in record.get("rehearsal", {}).items())
    return (record["run_id"], record["status"], str(record.get("wall_seconds", "")),
            record.get("reason", ""), caps)


def main(runs_dir: str) -> None:
    records = [json.load(open(f, encoding="utf-8"))
               for f in sorted(glob.glob(os.path.join(runs_dir, "*", "record.json")))]
    for fields in [HEADER, *(row(r) for r in records)]:
        print("\t".join(fields))


if __name__ == "__main__":
    main(sys.argv[1])
