"""The paper's claims, each tested on our runs: tables/findings.csv and findings.md.

A claim compares rows of one column of one table ("MLM+NSP > No NSP on MNLI"). Its
difference is our cells' `better - worse` (perplexity: `worse - better`, since lower is
better), with a 95% bootstrap interval (`reproduce.statistics`: paired where both cells
were scored on the same dev examples, unpaired otherwise). Where a side is "the best of
several rows", the best is taken again on every resample, so the interval carries the
uncertainty of which row is best. The paper's difference comes from
`reproduce.paper_numbers` for the same rows, or where the paper has none of our rows
(Table 6's sizes) for its own largest and smallest.

`build_tables` (`python -m reproduce.tables`) calls `findings_frame` and `write_findings`
on the cells frame and the estimates it built from the records: nothing is rerun.
"""

import dataclasses
import math
import os

import pandas as pd

from bert_tf import files
from reproduce import paper_numbers as paper
from reproduce import statistics
from reproduce.statistics import Estimate

COLUMNS = ["claim", "table", "paper_delta", "our_delta", "ci_low", "ci_high", "verdict",
           "scale", "compared"]
REPRODUCED, CONTRADICTED = "reproduced", "contradicted"
UNDECIDED = "not distinguishable at this budget"

HEADER = f"""# Findings: the paper's claims on our runs

One row per claim and column. `our_delta` is the difference of our cells (mean over the
fine-tuning restarts at the learning rate picked on dev) in the direction of the claim,
so a positive number agrees with the paper; `paper_delta` is the paper's, same
direction. [ci_low, ci_high] is a {statistics.CONFIDENCE:.0%} percentile bootstrap
interval of our difference: {statistics.RESAMPLES:,} resamples of the dev examples and of
each cell's fine-tuning restarts, the same examples for every restart of a cell and for
both cells of a claim when they were scored on the same examples (paired), independent
draws otherwise; the statistic is the difference of the two cells' means over the drawn
restarts (`reproduce/statistics.py`).

Verdicts:
- **{REPRODUCED}**: the interval excludes 0 on the paper's side;
  **{CONTRADICTED}**: it excludes 0 on the other side; else **{UNDECIDED}**.
- "X is as good as the best other row" (Table 8): X minus the best of the other rows,
  the best taken again on every resample. **{REPRODUCED}** when the interval includes 0
  or lies above it (no detectable gap below the best: with a wide interval this is weak
  evidence, read its width), **{CONTRADICTED}** when it lies below 0.
- "The best feature-based approach" (Table 7): the best of the feature-based rows other
  than embeddings only, taken again on every resample in the same way.
- Table 6 "larger models": our largest size against our smallest. The paper's delta is
  for the same rows where it has them, else for its own largest (L24/H1024/A16) and
  smallest (L3/H768/A12). Perplexity is lower for the better model, so its difference is
  smaller model's minus larger model's; its interval resamples the held-out sequences
  (paired: every size is evaluated on the same held-out records), from the pretraining
  runs' per-sequence losses (heldout_losses.tsv; older records lack it: "not computable").
- "unequal pretraining: A vs B sequences" after the rows compared: their models were
  pretrained on different numbers of sequences. The paper's rows had one budget (Table 6:
  1M steps of 256 sequences for every size); a scale that gives each model what its
  wall-clock budget buys (cpu: the larger model sees fewer sequences) confounds the model
  with its budget, so the verdict is about the two models, not the two sizes.
- "held-out accuracy after pretraining: A vs B" after the rows compared: each model's
  masked-LM accuracy (LTR: next-token accuracy) on the held-out pretraining records (80/10/10
  masks for every row), at the last evaluation at or before the step it was fine-tuned
  from, and in brackets the accuracy on the targets the input hid ([MASK] or a random
  token: what the context buys, comparable across Table 8's masking mixes). It says whether
  a model left the unigram plateau, where a masked LM predicts from word frequencies
  alone: the recipe search's Tiny runs that stayed on it ended at 14-17% masked-LM
  accuracy (hidden 6-8%), those that left it at 24-31% (hidden 19-24%)
  (results/pretraining/recipe_search/README.md).
  A claim between a model that left the plateau and one that did not compares how far
  each got within the budget more than the objectives themselves.
- Figure 5: MLM minus LTR at each pretraining step both were fine-tuned from; the paper
  gives only the sign ("outperforms it in absolute accuracy almost immediately").
- "n/a (reason)": a cell the claim needs is missing or did not finish; "not computable
  (reason)": the cells exist but have no per-example outputs for an interval.

What the intervals leave out: each row of Tables 5, 6 and 8 and Figure 5 is one
pretraining run, as in the paper, and the pretraining seed moves a model too: two seeds
of Tiny at lr 4e-3 (the cpu scale's recipe until 2026-11-28) ended 1.1 points of held-out
masked-LM accuracy apart (perplexity 224 against 260), two of the HF reference at 1e-3
0.6 points (results/pretraining/recipe_search/ and parity/ READMEs). So a verdict
between pretrained rows says that these two models differ after fine-tuning, which is
weaker than saying that their objectives do, most of all for a small gap.
"""


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim about one column: the best of `better` beats the best of `worse`.

    Args:
        text: the claim as the findings show it.
        table: the paper's table ("table5", "figure5").
        column: the column compared (Figure 5: the pretraining step).
        better, worse: row labels, as the cells and paper_numbers name them.
        paper_better, paper_worse: the paper's rows for its delta where it has none of
            ours (default: the same rows).
        as_good_as: "better is as good as the best of worse" (see HEADER).
        lower_is_better: perplexity: the difference is worse - better.
    """
    text: str
    table: str
    column: str
    better: tuple
    worse: tuple
    paper_better: tuple = ()
    paper_worse: tuple = ()
    as_good_as: bool = False
    lower_is_better: bool = False


FEATURE_ROWS = tuple(r for r, mode in paper.TABLE7_FEATURE_MODES.items() if mode != "embeddings")
EMBEDDINGS_ROW = next(r for r, mode in paper.TABLE7_FEATURE_MODES.items() if mode == "embeddings")
DEFAULT_MASK = "80/10/10"
OTHER_MASKS = tuple(r for r in paper.TABLE8_RATES if r != DEFAULT_MASK)


def fixed_claims() -> list[Claim]:
    """The claims whose rows do not depend on what ran (Tables 5, 7, 8)."""
    claims = [Claim(f"MLM+NSP > No NSP on {column}", "table5", column, ("BERT-BASE",),
                    ("No NSP",)) for column in ("MNLI-m", "QNLI", "SQuAD F1")]
    claims += [Claim(f"No NSP > LTR & No NSP on {column}", "table5", column, ("No NSP",),
                     ("LTR & No NSP",)) for column in ("MRPC", "SQuAD F1")]
    claims.append(Claim("+ BiLSTM helps LTR on SQuAD F1", "table5", "SQuAD F1",
                        ("+ BiLSTM",), ("LTR & No NSP",)))
    claims.append(Claim("NER: fine-tuning > the best feature-based approach (Dev F1)",
                        "table7", "Dev F1", ("Fine-tune BERT-BASE",), FEATURE_ROWS))
    claims.append(Claim("NER: the best feature-based approach > embeddings only (Dev F1)",
                        "table7", "Dev F1", FEATURE_ROWS, (EMBEDDINGS_ROW,)))
    claims += [Claim(f"80/10/10 is as good as the best other mix for fine-tuning ({column})",
                     "table8", column, (DEFAULT_MASK,), OTHER_MASKS, as_good_as=True)
               for column in ("MNLI", "NER fine-tune")]
    claims.append(Claim("80/10/10 > 0/0/100 for feature-based NER", "table8",
                        "NER feature-based", (DEFAULT_MASK,), ("0/0/100",)))
    return claims


def table6_claims(cells: pd.DataFrame) -> list[Claim]:
    """Our largest against our smallest model of Table 6, per column."""
    claims = []
    paper_rows = paper.rows("table6")
    for column in ("LM ppl", "MNLI-m", "MRPC", "SST-2"):
        text = ("larger models have lower held-out perplexity" if column == "LM ppl"
                else f"larger models are better on {column}")
        sized = cells[(cells["table"] == "table6") & (cells["column"] == column)
                      & cells["parameters"].notna()].sort_values("parameters", kind="stable")
        rows = list(dict.fromkeys(sized["row"]))
        largest, smallest = ((rows[-1],), (rows[0],)) if len(rows) >= 2 else ((), ())
        claims.append(Claim(text, "table6", column, largest, smallest,
                            (paper_rows[-1],), (paper_rows[0],),
                            lower_is_better=column == "LM ppl"))
    return claims


def figure5_claims(cells: pd.DataFrame) -> list[Claim]:
    """MLM against LTR at every step both were fine-tuned from."""
    figure = cells[cells["table"] == "figure5"]
    steps = sorted({int(s) for s in figure["column"]}) if len(figure) else []
    return [Claim(f"MLM above LTR after {step} pretraining steps", "figure5", str(step),
                  ("MLM",), ("LTR",)) for step in steps]


# ------------------------------------------------------------------------- one claim
def _negated(estimate: Estimate) -> Estimate:
    replicates = None if estimate.replicates is None else -estimate.replicates
    return Estimate(-estimate.value, replicates, estimate.reason)


def _claim_cells(cells: pd.DataFrame, claim: Claim, rows: tuple) -> pd.DataFrame:
    """The cells of `rows` in the claim's table and column."""
    return cells[(cells["table"] == claim.table) & (cells["column"] == claim.column)
                 & cells["row"].isin(rows)]


def _side(cells: pd.DataFrame, claim: Claim, rows: tuple, estimates: dict):
    """(the best of the rows' estimates, the rows used) or (None, why not)."""
    if not rows:  # Table 6 with fewer than two sizes
        return None, f"fewer than two model sizes have {claim.column} at this scale"
    match = _claim_cells(cells, claim, rows)
    if match.empty:
        named = rows[0] if len(rows) == 1 else f"any of its {len(rows)} rows"
        return None, f"no {claim.column} cell for {named} at this scale"
    chosen = []
    for _, cell in match.iterrows():
        if cell["status"] != "ok":
            return None, f"{cell['row']} {claim.column}: {cell['reason']}"
        estimate = estimates[(cell["run_id"], cell["metric"])]
        chosen.append(_negated(estimate) if claim.lower_is_better else estimate)
    return statistics.maximum(chosen), tuple(match["row"])


def _paper_value(claim: Claim, rows: tuple, fallback: tuple) -> float:
    """The best paper value of `rows` (oriented), else of `fallback`; nan if none."""
    for candidates in (rows, fallback or rows):
        numbers = [paper.lookup(claim.table, r, claim.column) for r in candidates]
        if candidates and all(numbers):
            values = [(-n.value if claim.lower_is_better else n.value) for n in numbers]
            return max(values)
    return math.nan


def _rows(rows: tuple) -> str:
    return rows[0] if len(rows) == 1 else f"the best of ({', '.join(rows)})"


def _sequences(cells: pd.DataFrame, claim: Claim, rows: tuple) -> set:
    sequences = _claim_cells(cells, claim, rows)["pretrain_sequences"]
    return set(sequences.dropna().astype(int))


def _thousands(counts: set) -> str:
    return "/".join(f"{n / 1000:,.0f}k" for n in sorted(counts))


def _unequal_pretraining(cells: pd.DataFrame, claim: Claim, better: tuple, worse: tuple) -> str:
    """A note where the compared rows' models saw different numbers of pretraining
    sequences (see HEADER), else ""."""
    ours, theirs = _sequences(cells, claim, better), _sequences(cells, claim, worse)
    if not ours or not theirs or ours == theirs:
        return ""
    return f" (unequal pretraining: {_thousands(ours)} vs {_thousands(theirs)} sequences)"


def _pretrained_accuracies(cells: pd.DataFrame, claim: Claim, better: tuple, worse: tuple) -> str:
    """The compared models' held-out accuracy after pretraining (see HEADER), where both
    sides were pretrained here, else ""."""
    def accuracies(rows):
        found = _claim_cells(cells, claim, rows)["pretrained_accuracy"]
        return "/".join(sorted({a for a in found.dropna() if a}))
    ours, theirs = accuracies(better), accuracies(worse)
    if not ours or not theirs:
        return ""
    return f" (held-out accuracy after pretraining: {ours} vs {theirs})"


def verdict(claim: Claim, low: float, high: float) -> str:
    """The verdict of an interval of our difference (oriented: > 0 agrees with the paper)."""
    if claim.as_good_as:
        return REPRODUCED if high >= 0 else CONTRADICTED
    if low > 0:
        return REPRODUCED
    if high < 0:
        return CONTRADICTED
    return UNDECIDED


def evaluate(claim: Claim, cells: pd.DataFrame, estimates: dict) -> dict:
    """One finding: the claim, the paper's and our difference, the interval, the verdict."""
    row = {"claim": claim.text, "table": claim.table, "paper_delta": math.nan,
           "our_delta": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    better, better_rows = _side(cells, claim, claim.better, estimates)
    worse, worse_rows = _side(cells, claim, claim.worse, estimates)
    found = better is not None and worse is not None
    paper_rows = (better_rows, worse_rows) if found else (claim.better, claim.worse)
    # (rounded to the paper's precision: 88.5 - 87.9 is 0.6, not 0.5999999999999943)
    row["paper_delta"] = round(_paper_value(claim, paper_rows[0], claim.paper_better)
                               - _paper_value(claim, paper_rows[1], claim.paper_worse), 2)
    if not found:
        return {**row, "verdict": f"n/a ({better_rows if better is None else worse_rows})",
                "compared": ""}
    delta = statistics.difference(better, worse)
    low, high = delta.interval()
    row.update(our_delta=delta.value, ci_low=low, ci_high=high,
               compared=f"{_rows(better_rows)} vs {_rows(worse_rows)}"
               + _unequal_pretraining(cells, claim, better_rows, worse_rows)
               + _pretrained_accuracies(cells, claim, better_rows, worse_rows))
    if math.isnan(low):
        return {**row, "verdict": f"not computable ({delta.reason or 'undefined metric'})"}
    return {**row, "verdict": verdict(claim, low, high)}


# ---------------------------------------------------------------------------- outputs
def findings_frame(cells: pd.DataFrame, estimates: dict) -> pd.DataFrame:
    """One row per claim (and column) per scale; `cells`: `tables.cells_frame`."""
    rows = []
    scales = list(dict.fromkeys(cells["scale"])) or [None]
    for scale in scales:
        part = cells[cells["scale"] == scale]
        for claim in fixed_claims() + table6_claims(part) + figure5_claims(part):
            rows.append({**evaluate(claim, part, estimates), "scale": scale})
    order = {t: i for i, t in enumerate(paper.TITLES)}
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values("table", key=lambda t: t.map(order), kind="stable")


def _number(value: float) -> str:
    return "" if value is None or math.isnan(value) else f"{value:+.2f}"


def findings_markdown(frame: pd.DataFrame) -> str:
    lines = [HEADER]
    if frame.empty:
        return "\n".join(lines + ["No runs recorded yet.", ""])
    for scale, group in frame.groupby("scale", sort=False, dropna=False):
        lines += [f"## Scale: {scale}", "",
                  "| claim | table | paper Δ | our Δ [95% CI] | verdict | compared |",
                  "|---|---|---|---|---|---|"]
        for _, r in group.iterrows():
            ours = _number(r["our_delta"])
            if ours and not math.isnan(r["ci_low"]):
                ours += f" [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"
            lines.append(f"| {r['claim']} | {r['table']} | {_number(r['paper_delta']) or '–'} "
                         f"| {ours or '–'} | {r['verdict']} | {r['compared']} |")
        lines.append("")
    return "\n".join(lines)


def write_findings(cells: pd.DataFrame, estimates: dict, tables_dir: str) -> list[str]:
    """Writes findings.csv and findings.md into `tables_dir`; returns their names."""
    frame = findings_frame(cells, estimates)
    with files.atomic_open(os.path.join(tables_dir, "findings.csv")) as f:
        frame.to_csv(f, index=False)
    files.write_text(os.path.join(tables_dir, "findings.md"), findings_markdown(frame))
    return ["findings.csv", "findings.md"]
