"""How closely a replayed pretraining run follows its committed record: the largest
relative difference of each logged quantity over the steps both metrics.csv files hold.

    python results/glue_suite/squad_longer_probe/replay_check.py \
        results/runs/cpu.pretrain.tiny-no_nsp-1408k/files/metrics.csv \
        runs/cpu.pretrain.tiny-no_nsp-1408k/metrics.csv
"""
import csv
import sys

COLUMNS = ("loss", "mlm_accuracy", "mlm_hidden_accuracy")


def rows_by_step(path: str) -> dict:
    with open(path, newline="") as f:
        return {(row["step"], row["split"]): row for row in csv.DictReader(f)}


def main(committed_csv: str, replay_csv: str) -> None:
    committed, replay = rows_by_step(committed_csv), rows_by_step(replay_csv)
    shared = sorted(set(committed) & set(replay), key=lambda k: (k[1], int(k[0])))
    print(f"{len(shared)} logged rows in both (of {len(committed)} committed)")
    for split in ("train", "eval"):
        keys = [k for k in shared if k[1] == split]
        for column in COLUMNS:
            worst = max(keys, key=lambda k: abs(float(replay[k][column])
                                                / float(committed[k][column]) - 1))
            a, b = float(committed[worst][column]), float(replay[worst][column])
            print(f"{split:5} {column:20} steps {keys[0][0]}-{keys[-1][0]}: largest relative "
                  f"difference {abs(b / a - 1):.2%} at step {worst[0]} ({a:.5g} vs {b:.5g})")
    last = max((k for k in shared if k[1] == "eval"), key=lambda k: int(k[0]))
    print(f"last held-out row, step {last[0]}: committed loss {committed[last]['loss']} "
          f"accuracy {committed[last]['mlm_accuracy']}; replay loss {replay[last]['loss']} "
          f"accuracy {replay[last]['mlm_accuracy']}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
