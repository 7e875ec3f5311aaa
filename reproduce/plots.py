"""The two figures of `reproduce.tables`: Table 6 against model size, Figure 5 against
pretraining steps. Input: the cells frame of `tables.cells_frame`; output: a PNG."""

import pandas as pd

from bert_tf import files
from bert_tf.config import config_for_size
from reproduce import paper_numbers as paper


def _pyplot():
    import matplotlib  # imported here: only the plots need it
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path: str) -> None:
    fig.tight_layout()
    with files.atomic_open(path, "wb") as f:
        fig.savefig(f, dpi=120, format="png")
    plt.close(fig)


def plot_table6(cells: pd.DataFrame, path: str) -> bool:
    """Held-out perplexity and dev accuracy against parameters, ours and the paper's."""
    plt = _pyplot()
    ok = cells[(cells["status"] == "ok") & cells["parameters"].notna()]
    if ok.empty:
        return False
    fig, (ax_ppl, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    paper_params = {row: config_for_size(name).num_parameters()
                    for row, (_, name) in paper.TABLE6_SIZES.items()}
    for scale, group in ok.groupby("scale"):
        ppl = group[group["column"] == "LM ppl"].sort_values("parameters")
        if len(ppl):
            ax_ppl.plot(ppl["parameters"], ppl["ours"], "o-", label=f"ours ({scale})")
        for column, marker in (("MNLI-m", "o"), ("MRPC", "s"), ("SST-2", "^")):
            acc = group[group["column"] == column].sort_values("parameters")
            if len(acc):
                ax_acc.errorbar(acc["parameters"], acc["ours"], yerr=acc["std"].fillna(0),
                                marker=marker, label=f"{column} ours ({scale})", capsize=3)
    ax_ppl.plot(list(paper_params.values()), [paper.TABLE6[r][0] for r in paper_params],
                "k--x", label="paper")
    for i, (column, marker) in enumerate((("MNLI-m", "o"), ("MRPC", "s"), ("SST-2", "^"))):
        ax_acc.plot(list(paper_params.values()), [paper.TABLE6[r][i + 1] for r in paper_params],
                    "k--", marker=marker, alpha=0.5, label=f"{column} paper")
    for ax, title, ylabel in ((ax_ppl, "Held-out masked-LM perplexity", "perplexity"),
                              (ax_acc, "Dev accuracy", "accuracy (%)")):
        ax.set_xscale("log")
        ax.set_xlabel("encoder parameters")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax_ppl.set_yscale("log")
    fig.suptitle("Table 6: model size")
    _save(plt, fig, path)
    return True


def plot_figure5(cells: pd.DataFrame, path: str) -> bool:
    """Downstream accuracy against pretraining steps, one line per objective and scale."""
    plt = _pyplot()
    ok = cells[(cells["status"] == "ok") & cells["pretrain_step"].notna()]
    if ok.empty:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for (scale, row), group in ok.groupby(["scale", "row"]):
        group = group.sort_values("pretrain_step")
        ax.errorbar(group["pretrain_step"], group["ours"], yerr=group["std"].fillna(0),
                    marker="o", capsize=3, label=f"{row} ({scale})")
    tasks = ", ".join(sorted(ok["task"].dropna().unique()))
    ax.set_xlabel("pretraining steps")
    ax.set_ylabel(f"{tasks} dev accuracy (%)")
    ax.set_title("Figure 5: MLM vs LTR over pretraining")
    ax.grid(alpha=0.3)
    ax.legend()
    _save(plt, fig, path)
    return True
