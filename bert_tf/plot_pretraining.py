"""Plot a pretraining run's curves from its metrics.csv (written by bert_tf.pretrain).

    python -m bert_tf.plot_pretraining --model_dir D [--output D/curves.png]

Three panels against the step: masked-LM accuracy, next-sentence accuracy (train and
held-out), and held-out masked-LM perplexity (the paper's Table 6 measure).
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def plot(metrics_csv: str, output: str, title: str = "") -> None:
    frame = pd.read_csv(metrics_csv)
    if frame.empty:
        raise ValueError(f"{metrics_csv}: no rows to plot")
    # A resumed run may log a step twice; keep the last record of each (step, split).
    frame = frame.drop_duplicates(["step", "split"], keep="last").sort_values("step")
    train, held_out = frame[frame.split == "train"], frame[frame.split == "eval"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, column, label in ((axes[0], "mlm_accuracy", "masked-LM accuracy"),
                              (axes[1], "nsp_accuracy", "next-sentence accuracy")):
        ax.plot(train.step, train[column], label="train", alpha=0.7)
        ax.plot(held_out.step, held_out[column], "o-", label="held-out")
        ax.set_xlabel("step")
        ax.set_title(label)
        ax.legend()
    axes[2].plot(held_out.step, held_out.mlm_perplexity, "o-", color="C1")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("step")
    axes[2].set_title("held-out masked-LM perplexity")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(output, dpi=100)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--output", default=None, help="default: MODEL_DIR/curves.png")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    output = args.output or os.path.join(args.model_dir, "curves.png")
    plot(os.path.join(args.model_dir, "metrics.csv"), output, args.title)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
