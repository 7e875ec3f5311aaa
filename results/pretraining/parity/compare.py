"""Held-out masked-LM loss of bert_tf.pretrain against the Hugging Face reference, step
by step: prints the table and the largest relative gap after warmup, draws one plot.

    python results/pretraining/parity/compare.py --ours RUN/metrics.csv \
        --reference hf_seed0.csv [hf_seed1.csv ...] --warmup 100 --plot curves.png

Several reference files (seeds) are averaged; so are several --ours files. --until STEP
limits the verdict to the evaluations up to STEP (e.g. while a reference trained on a
subset of the records has not yet repeated it more often than the run did).
"""

import argparse
import sys

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file backend)


def held_out_curve(paths: list) -> pd.DataFrame:
    """Mean held-out mlm_loss / mlm_accuracy per step over the given metrics files."""
    frames = []
    for path in paths:
        frame = pd.read_csv(path)
        frames.append(frame[frame["split"] == "eval"][["step", "mlm_loss", "mlm_accuracy"]])
    return pd.concat(frames).groupby("step").mean()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", nargs="+", required=True)
    p.add_argument("--reference", nargs="+", required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--until", type=int, help="judge the evaluations up to this step only")
    p.add_argument("--plot")
    args = p.parse_args(argv)
    ours, reference = held_out_curve(args.ours), held_out_curve(args.reference)
    both = ours.merge(reference, left_index=True, right_index=True, suffixes=("_ours", "_hf"))
    both["relative_gap"] = (both["mlm_loss_ours"] - both["mlm_loss_hf"]) / both["mlm_loss_hf"]
    print(both.to_string(float_format=lambda x: f"{x:.4f}"))
    judged = both[(both.index > args.warmup) & (both.index <= (args.until or both.index.max()))]
    worst = judged["relative_gap"].abs().max()
    print(f"largest |relative gap| of held-out MLM loss after warmup "
          f"(steps {judged.index.min()}-{judged.index.max()}): {worst:.2%} "
          f"({'within' if worst <= 0.02 else 'OUTSIDE'} 2%)")
    if args.plot:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(both.index, both["mlm_loss_ours"], "o-", label="bert_tf.pretrain (Keras 3)")
        ax.plot(both.index, both["mlm_loss_hf"], "s--", label="HF BertForPreTraining (PyTorch)")
        ax.set_xlabel("step")
        ax.set_ylabel("held-out masked-LM loss")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
