"""reproduce.findings: the verdict rules, one claim at a time, and findings.csv / .md (with
the tables' intervals) built by reproduce.tables from SYNTHETIC records whose restarts/
files are written with glue_suite.predictions."""

import math
import types

import numpy as np
import pandas as pd
import pytest

from glue_suite import predictions, squad_eval
from glue_suite.metrics import entity_f1
from glue_suite.readers import InputExample, NerSentence
from glue_suite.squad_postprocess import SquadPredictions
from glue_suite.tasks import get_task
from reproduce import findings, tables
from reproduce.findings import CONTRADICTED, REPRODUCED, UNDECIDED, Claim
from reproduce.plan import Cell
from reproduce.records import write_record
from reproduce.statistics import NO_PER_EXAMPLE_PERPLEXITY, Estimate


# ------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize("low,high,as_good_as,expected", [
    (0.5, 2.0, False, REPRODUCED), (-2.0, -0.1, False, CONTRADICTED),
    (-1.0, 1.0, False, UNDECIDED), (0.0, 1.0, False, UNDECIDED),
    (-1.0, 1.0, True, REPRODUCED), (0.5, 2.0, True, REPRODUCED),
    (-2.0, -0.1, True, CONTRADICTED)])
def test_verdict_rules(low, high, as_good_as, expected):
    claim = Claim("c", "table5", "MRPC", ("a",), ("b",), as_good_as=as_good_as)
    assert findings.verdict(claim, low, high) == expected


def _cells(rows):
    """A cells frame of (table, row, column, status, run_id, parameters) rows, pretraining
    budgets and accuracies unknown (as for a checkpoint pretrained elsewhere)."""
    return pd.DataFrame([{"scale": "cpu", "table": t, "row": r, "column": c, "metric": "m",
                          "status": s, "reason": "" if s == "ok" else "no data",
                          "run_id": run, "parameters": p, "pretrain_sequences": None,
                          "pretrained_accuracy": ""}
                         for t, r, c, s, run, p in rows])


def test_one_claim_na_not_computable_and_perplexity_direction():
    claim = Claim("MLM+NSP > No NSP on QNLI", "table5", "QNLI", ("BERT-BASE",), ("No NSP",))
    cells = _cells([("table5", "BERT-BASE", "QNLI", "unavailable", "a", None)])
    finding = findings.evaluate(claim, cells, {})
    assert finding["verdict"] == "n/a (BERT-BASE QNLI: no data)"
    assert finding["paper_delta"] == pytest.approx(88.4 - 84.9) and math.isnan(finding["our_delta"])

    cells = _cells([("table6", "L4/H256/A4", "LM ppl", "ok", "big", 11e6),
                    ("table6", "L2/H128/A2", "LM ppl", "ok", "small", 4e6)])
    estimates = {("big", "m"): Estimate(90.0, None, NO_PER_EXAMPLE_PERPLEXITY),
                 ("small", "m"): Estimate(100.0, None, NO_PER_EXAMPLE_PERPLEXITY)}
    [ppl, *others] = findings.table6_claims(cells)
    finding = findings.evaluate(ppl, cells, estimates)
    assert finding["our_delta"] == pytest.approx(10.0)  # smaller's minus larger's
    assert finding["paper_delta"] == pytest.approx(5.84 - 3.23)  # the paper's extremes
    assert finding["verdict"] == f"not computable ({NO_PER_EXAMPLE_PERPLEXITY})"
    assert finding["compared"] == "L4/H256/A4 vs L2/H128/A2"
    assert findings.evaluate(others[0], cells, estimates)["verdict"] == (
        "n/a (fewer than two model sizes have MNLI-m at this scale)")


def test_rows_pretrained_on_different_budgets_are_flagged():
    cells = _cells([("table6", "L4/H256/A4", "LM ppl", "ok", "big", 11e6),
                    ("table6", "L2/H128/A2", "LM ppl", "ok", "small", 4e6)])
    estimates = {("big", "m"): Estimate(90.0, np.array([89.0, 91.0])),
                 ("small", "m"): Estimate(100.0, np.array([99.0, 101.0]))}
    [ppl, *_] = findings.table6_claims(cells)
    cells["pretrain_sequences"] = [268_800, 960_000]
    assert findings.evaluate(ppl, cells, estimates)["compared"] == (
        "L4/H256/A4 vs L2/H128/A2 (unequal pretraining: 269k vs 960k sequences)")
    cells["pretrain_sequences"] = [960_000, 960_000]
    assert findings.evaluate(ppl, cells, estimates)["compared"] == "L4/H256/A4 vs L2/H128/A2"
    cells["pretrain_sequences"] = [268_800, None]  # the shipped checkpoint: no budget known
    assert findings.evaluate(ppl, cells, estimates)["compared"] == "L4/H256/A4 vs L2/H128/A2"


def test_a_cell_knows_the_sequences_its_model_was_pretrained_on():
    model = {"size": "mini", "label": "L4/H256/A4", "steps": 4200, "batch_size": 64}
    record = {"run_id": "ft", "status": "running", "scale": "cpu",
              "cells": [{"table": "table6", "row": "L4/H256/A4", "column": "MNLI-m",
                         "metric": "accuracy"}]}
    final = tables.cells_frame([{**record, "info": {"model": model}}])
    exported = tables.cells_frame([{**record, "info": {"model": model, "pretrain_step": 1500}}])
    shipped = tables.cells_frame([{**record, "info": {"model": {"label": "MiniLM"}}}])
    assert final["pretrain_sequences"].tolist() == [4200 * 64]
    assert exported["pretrain_sequences"].tolist() == [1500 * 64]
    assert shipped["pretrain_sequences"].isna().all()


def test_a_cell_knows_how_far_its_model_got_in_pretraining(tmp_path):
    metrics = tmp_path / "runs" / "pre" / "files" / "metrics.csv"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("step,split,mlm_accuracy,mlm_hidden_accuracy\n600,train,0.5,0.4\n"
                       "600,eval,0.11,0.05\n1200,eval,0.15,0.08\n1800,eval,0.2,0.125\n")
    evaluations = tables.heldout_evaluations(
        [{"run_id": "pre", "stage": "pretrain"}, {"run_id": "ft", "stage": "finetune"}],
        str(tmp_path))
    assert evaluations == {"pre": [(600, 0.11, 0.05), (1200, 0.15, 0.08), (1800, 0.2, 0.125)]}
    model = {"label": "L2/H128/A2", "steps": 1800, "batch_size": 64, "objective": "nsp"}
    record = {"run_id": "ft", "status": "running", "scale": "cpu", "needs": ["pre"],
              "cells": [{"table": "table5", "row": "BERT-BASE", "column": "MNLI-m",
                         "metric": "accuracy"}]}

    def accuracy(info):
        return tables.cells_frame([{**record, "info": info}], None,
                                  evaluations)["pretrained_accuracy"].item()
    assert accuracy({"model": model}) == "masked LM 20.0% (hidden 12.5%)"
    # an export between evaluations: the last one before it
    assert accuracy({"model": model, "pretrain_step": 1500}) == "masked LM 15.0% (hidden 8.0%)"
    assert accuracy({"model": {**model, "objective": "ltr"}}) == "next token 20.0%"
    assert accuracy({"model": {"label": "MiniLM"}}) == ""

    claim = Claim("MLM+NSP > No NSP on MNLI-m", "table5", "MNLI-m", ("BERT-BASE",), ("No NSP",))
    cells = _cells([("table5", "BERT-BASE", "MNLI-m", "ok", "a", None),
                    ("table5", "No NSP", "MNLI-m", "ok", "b", None)])
    estimates = {("a", "m"): Estimate(80.0, np.array([79.0, 81.0])),
                 ("b", "m"): Estimate(70.0, np.array([69.0, 71.0]))}
    assert findings.evaluate(claim, cells, estimates)["compared"] == "BERT-BASE vs No NSP"
    cells["pretrained_accuracy"] = ["masked LM 27.7%", "masked LM 16.4%"]
    assert findings.evaluate(claim, cells, estimates)["compared"] == (
        "BERT-BASE vs No NSP (held-out accuracy after pretraining: masked LM 27.7% vs "
        "masked LM 16.4%)")


def test_the_best_of_several_rows_is_taken_per_resample():
    claim = next(c for c in findings.fixed_claims() if c.text.startswith("NER: fine-tuning"))
    cells = _cells([("table7", "Fine-tune BERT-BASE", "Dev F1", "ok", "ft", None),
                    ("table7", "last hidden", "Dev F1", "ok", "last", None),
                    ("table7", "concat last four hidden", "Dev F1", "ok", "concat", None)])
    estimates = {("ft", "m"): Estimate(90.0, np.array([90.0, 91.0, 89.0])),
                 ("last", "m"): Estimate(88.0, np.array([88.0, 92.0, 85.0])),
                 ("concat", "m"): Estimate(89.0, np.array([89.5, 87.0, 90.0]))}
    finding = findings.evaluate(claim, cells, estimates)
    assert finding["our_delta"] == pytest.approx(1.0)
    # per resample: 90 - 89.5, 91 - 92, 89 - 90
    assert (finding["ci_low"], finding["ci_high"]) == pytest.approx(
        tuple(np.percentile([0.5, -1.0, -1.0], [2.5, 97.5])))
    assert finding["paper_delta"] == pytest.approx(96.4 - 96.1)  # concat: the paper's best
    assert finding["verdict"] == UNDECIDED


# ------------------------------------------------------------- tables from records
HARDWARE = {"cpu": "synthetic", "cpu_cores": 2, "memory_gib": 1.0,
            "packages": {"tensorflow": "x"}}


def _record(run_id, cells, stage="finetune", status="finished", **fields):
    return {"run_id": run_id, "stage": stage, "scale": "cpu", "status": status,
            "cells": [vars(c) for c in cells], "tables": sorted({c.table for c in cells}),
            "info": {"model": {"size": "tiny", "label": "L2/H128/A2"}},
            "command": f"python -m synthetic {run_id}", "wall_seconds": 1.0,
            "git": {"commit": "0" * 40, "dirty": False}, "hardware": HARDWARE, **fields}


def _finetune(out, run_id, cells, task, examples, restarts, metrics_of):
    """A finished fine-tuning record of `task`, its restarts' (seeds 0..) files written as
    glue_suite.run writes them and their metrics computed from the same predictions."""
    spec = get_task(task)
    split = spec.eval_splits[0]
    files_dir = str(out / "runs" / run_id / "files")
    predictions.write_gold(spec, split, examples, files_dir)
    runs = []
    for seed, predicted in enumerate(restarts):
        where = predictions.restart_dir(files_dir, 1e-4, seed)
        predictions.write_restart(spec, split, examples, predicted, where)
        runs.append({"learning_rate": 1e-4, "seed": seed, "metrics": metrics_of(predicted),
                     "degenerate": False})
    names = list(runs[0]["metrics"])
    values = {k: [r["metrics"][k] for r in runs] for k in names}
    group = {"learning_rate": 1e-4, "runs": len(runs), "degenerate_runs": 0,
             "mean": {k: float(np.mean(v)) for k, v in values.items()},
             "std": {k: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
                     for k, v in values.items()}}
    grid = {"best_learning_rate": 1e-4, "runs": runs, "by_learning_rate": [group],
            "degenerate_runs": []}
    write_record(str(out), _record(run_id, cells, metrics=runs[0]["metrics"],
                                   result={"task": task, "grid": grid}))


def _mnli(out, rng, run_id, row, accuracies):
    labels = get_task("mnli").labels
    gold = np.random.default_rng(0).integers(0, 3, 400)  # the same dev set for every row
    examples = [InputExample(str(i), "a", "b", labels[g]) for i, g in enumerate(gold)]
    restarts = [np.where(rng.random(400) < a, gold, (gold + 1) % 3) for a in accuracies]
    _finetune(out, run_id, [Cell("table5", row, "MNLI-m", "accuracy")], "mnli", examples,
              restarts, lambda p: {"accuracy": 100 * float(np.mean(p == gold))})


def _squad(out, rng, run_id, row, hit_rate):
    examples = [types.SimpleNamespace(qas_id=f"q{i}", answers=(f"answer {i}", f"{i}"))
                for i in range(300)]
    answer = {e.qas_id: (e.answers[0] if rng.random() < hit_rate else "wrong") for e in examples}
    qas = [{"id": e.qas_id, "answers": [{"text": a} for a in e.answers]} for e in examples]
    dataset = [{"paragraphs": [{"qas": qas}]}]
    _finetune(out, run_id, [Cell("table5", row, "SQuAD F1", "f1")], "squad1.1", examples,
              [SquadPredictions(answer, {}, answer, {})],
              lambda p: squad_eval.evaluate_v1(dataset, p.predictions))


def _conll(out, rng, run_id, row, column, hit_rate):
    gold = [["B-PER", "I-PER", "O", "B-LOC"] for _ in range(200)]
    examples = [NerSentence(0, ("w",) * 4, tuple(tags)) for tags in gold]
    predicted = [[t if rng.random() < hit_rate else "O" for t in tags] for tags in gold]
    _finetune(out, run_id, [Cell("table8", row, column, "ner_f1")], "conll2003", examples,
              [predicted], lambda p: {"ner_f1": entity_f1(gold, p)["f1"]})


@pytest.fixture
def results(tmp_path):
    out, rng = tmp_path / "results", np.random.default_rng(5)
    _mnli(out, rng, "ft.nsp.mnli", "BERT-BASE", [0.80, 0.78])
    _mnli(out, rng, "ft.no_nsp.mnli", "No NSP", [0.60, 0.62])
    _squad(out, rng, "ft.nsp.squad", "BERT-BASE", 0.50)
    _squad(out, rng, "ft.no_nsp.squad", "No NSP", 0.50)
    _squad(out, rng, "ft.ltr.squad", "LTR & No NSP", 0.80)
    _conll(out, rng, "ft.nsp.conll", "80/10/10", "NER fine-tune", 0.80)
    _conll(out, rng, "ft.mask100.conll", "100/0/0", "NER fine-tune", 0.82)
    _conll(out, rng, "ft.nsp.features", "80/10/10", "NER feature-based", 0.40)
    _conll(out, rng, "ft.mask0.features", "0/0/100", "NER feature-based", 0.90)
    write_record(str(out), _record("ft.nsp.qnli", [Cell("table5", "BERT-BASE", "QNLI", "accuracy")],
                                   status="unavailable", reason="no QNLI train data"))
    write_record(str(out), _record("pt.tiny", [Cell("table6", "L2/H128/A2", "LM ppl",
                                                    "mlm_perplexity")],
                                   stage="pretrain", metrics={"mlm_perplexity": 120.0}))
    return out


def test_findings_and_intervals_from_synthetic_records(results):
    written = tables.build_tables(str(results))
    assert {"findings.csv", "findings.md"} <= set(written)
    frame = pd.read_csv(results / "tables" / "findings.csv")
    assert list(frame.columns[:7]) == ["claim", "table", "paper_delta", "our_delta", "ci_low",
                                       "ci_high", "verdict"]
    verdicts = dict(zip(frame["claim"], frame["verdict"]))
    assert verdicts["MLM+NSP > No NSP on MNLI-m"] == REPRODUCED
    assert verdicts["MLM+NSP > No NSP on SQuAD F1"] == UNDECIDED
    assert verdicts["No NSP > LTR & No NSP on SQuAD F1"] == CONTRADICTED
    assert verdicts["MLM+NSP > No NSP on QNLI"] == "n/a (BERT-BASE QNLI: no QNLI train data)"
    assert (verdicts["No NSP > LTR & No NSP on MRPC"]
            == "n/a (no MRPC cell for No NSP at this scale)")
    assert verdicts["80/10/10 is as good as the best other mix for fine-tuning (NER fine-tune)"
                    ] == REPRODUCED
    assert verdicts["80/10/10 > 0/0/100 for feature-based NER"] == CONTRADICTED
    assert verdicts["larger models have lower held-out perplexity"].startswith("n/a (fewer")
    mnli = frame[frame["claim"] == "MLM+NSP > No NSP on MNLI-m"].iloc[0]
    assert mnli["paper_delta"] == pytest.approx(0.5)
    assert mnli["ci_low"] < mnli["our_delta"] < mnli["ci_high"] and mnli["ci_low"] > 10
    assert len(frame) >= 15 and set(frame["scale"]) == {"cpu"}
    assert "| MLM+NSP > No NSP on MNLI-m | table5 | +0.50 |" in (
        results / "tables" / "findings.md").read_text()

    # The tables show mean [interval] ± std (n); the csv has the interval's columns.
    cells = pd.read_csv(results / "tables" / "table5.csv")
    row = cells[(cells["row"] == "BERT-BASE") & (cells["column"] == "MNLI-m")].iloc[0]
    assert row["ci_low"] < row["ours"] < row["ci_high"] and row["seeds"] == 2
    table5 = (results / "tables" / "table5.md").read_text()
    assert (f"{row['ours']:.1f} [{row['ci_low']:.1f}, {row['ci_high']:.1f}] "
            f"± {row['std']:.1f} (n=2) / 84.4") in table5
    ppl = pd.read_csv(results / "tables" / "table6.csv").iloc[0]
    assert math.isnan(ppl["ci_low"]) and ppl["ci_note"] == NO_PER_EXAMPLE_PERPLEXITY
    assert "120.00 / –" in (results / "tables" / "table6.md").read_text()
