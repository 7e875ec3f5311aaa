"""What each table and figure of the paper needs: one plain function per table.

Each function asks a `reproduce.plan.Planner` for the runs that fill the table's cells
(pretraining, then fine-tuning on each column's task), with the settings of the
planner's scale (`reproduce.scales`). `EXPERIMENTS` lists them; `build_plan` runs them
all and returns the `Plan` that `python -m reproduce.all` executes.

Adding a table: its function here, its entry in `EXPERIMENTS`, its numbers in
`reproduce/paper_numbers.py`.
"""

import dataclasses
import os
from typing import Optional

from reproduce import models
from reproduce import paper_numbers as paper
from reproduce.commands import STRATEGIES
from reproduce.plan import PAPER_RATES, Cell, FinetuneJob, Plan, Planner
from reproduce.scales import SCALES

BASE_ROWS = ("BERT-BASE", "BERT-LARGE")
# The small GLUE sets, where the paper ran "several random restarts" of BERT-LARGE.
_SMALL_GLUE = ("cola", "stsb", "mrpc", "rte", "wnli")


# --------------------------------------------------------------------------- models
def _ablation_model(planner: Planner, objective: str = "nsp", rates: tuple = PAPER_RATES,
                    size: Optional[str] = None, cells: tuple = ()) -> str:
    """The pretrain run_id of a Tables 5, 6, 8 / Figure 5 model (equal budget for all)."""
    return planner.pretrain(size or planner.scale.ablation_size, objective, rates,
                            cells=cells)


def _main_model(planner: Planner, row: str, cased: bool = False) -> Optional[str]:
    """The pretrain run_id of a main row ("BERT-BASE"), or None for the default
    shipped checkpoint."""
    size = planner.scale.main_models[row]
    if size is None:
        return None
    return planner.pretrain(size, "nsp", vocab="cased" if cased else "uncased")


def _main(planner: Planner, task: str, cells_by_row: dict, train_task=None) -> None:
    """Fine-tunes each main model (paper rows BERT-BASE / BERT-LARGE) on `task`."""
    s = planner.scale
    for row in s.main_models:
        if row not in cells_by_row:
            continue
        ft = s.main[task]
        if row == "BERT-LARGE" and task in _SMALL_GLUE:
            ft = dataclasses.replace(ft, seeds=s.large_restarts)
        planner.finetune(FinetuneJob(task, _main_model(planner, row), ft,
                                     cells=cells_by_row[row], train_task=train_task,
                                     main=True))


# --------------------------------------------------------------------------- tables
def table1(planner: Planner) -> None:
    """GLUE."""
    columns = {"mnli": [("MNLI-m", "accuracy"), ("MNLI-mm", "dev_mismatched_accuracy")],
               "qqp": [("QQP", "f1")], "qnli": [("QNLI", "accuracy")],
               "sst2": [("SST-2", "accuracy")], "cola": [("CoLA", "mcc")],
               "stsb": [("STS-B", "spearman")], "mrpc": [("MRPC", "f1")],
               "rte": [("RTE", "accuracy")], "wnli": [("WNLI", "accuracy")]}
    for task, cols in columns.items():
        _main(planner, task, {row: tuple(Cell("table1", row, c, m) for c, m in cols)
                              for row in BASE_ROWS})


def table2(planner: Planner) -> None:
    """SQuAD v1.1."""
    _main(planner, "squad1.1", {
        base: (Cell("table2", f"{base} (single)", "Dev EM", "exact_match"),
               Cell("table2", f"{base} (single)", "Dev F1", "f1"))
        for base in BASE_ROWS})


def table3(planner: Planner) -> None:
    """SQuAD v2.0. The paper picks the no-answer threshold on dev: the official
    script's best_*."""
    train_task = None
    if planner.scale.squad2_from_squad1 and not planner.has_train("squad2.0"):
        train_task = "squad1.1"
    _main(planner, "squad2.0", {
        base: (Cell("table3", f"{base} (single)", "Dev EM", "best_exact"),
               Cell("table3", f"{base} (single)", "Dev F1", "best_f1"))
        for base in BASE_ROWS}, train_task=train_task)


def table4(planner: Planner) -> None:
    """SWAG."""
    _main(planner, "swag", {row: (Cell("table4", row, "Dev", "accuracy"),)
                            for row in BASE_ROWS})


def table5(planner: Planner) -> None:
    """Ablation over the pretraining tasks, at one model size and budget."""
    s = planner.scale
    columns = (("mnli", "MNLI-m", "accuracy"), ("qnli", "QNLI", "accuracy"),
               ("mrpc", "MRPC", "accuracy"), ("sst2", "SST-2", "accuracy"),
               ("squad1.1", "SQuAD F1", "f1"))
    for row, objective, head in (("BERT-BASE", "nsp", None), ("No NSP", "no_nsp", None),
                                 ("LTR & No NSP", "ltr", None), ("+ BiLSTM", "ltr", "bilstm")):
        model = _ablation_model(planner, objective)
        for task, column, metric in columns:
            if head and s.bilstm_tasks is not None and task not in s.bilstm_tasks:
                continue
            planner.finetune(FinetuneJob(task, model, s.ablation[task],
                                         cells=(Cell("table5", row, column, metric),),
                                         variant="bilstm" if head else "", head=head))


def table6(planner: Planner) -> None:
    """Model size: held-out perplexity and fine-tuned accuracy."""
    s = planner.scale
    for size in s.table6_sizes:
        row = next((label for label, (_, name) in paper.TABLE6_SIZES.items()
                    if name == size), models.size_label(size))
        model = _ablation_model(planner, size=size,
                                cells=(Cell("table6", row, "LM ppl", "mlm_perplexity"),))
        for task, column in (("mnli", "MNLI-m"), ("mrpc", "MRPC"), ("sst2", "SST-2")):
            planner.finetune(FinetuneJob(task, model, s.ablation[task],
                                         cells=(Cell("table6", row, column, "accuracy"),)))


def table7(planner: Planner) -> None:
    """CoNLL-2003 NER: fine-tuned, and feature-based (frozen encoder + BiLSTM)."""
    s = planner.scale
    cased = s.ner_cased

    def cells(label):
        return (Cell("table7", label, "Dev F1", "ner_f1"),
                Cell("table7", label, "Test F1", "test_ner_f1"))

    for row in BASE_ROWS:
        if row in s.main_models:
            planner.finetune(FinetuneJob("conll2003", _main_model(planner, row, cased),
                                         s.main["conll2003"], cells=cells(f"Fine-tune {row}"),
                                         main=True))
    model = _main_model(planner, "BERT-BASE", cased)
    for label in s.feature_rows:
        mode = paper.TABLE7_FEATURE_MODES[label]
        planner.finetune(FinetuneJob("conll2003", model, s.features, cells=cells(label),
                                     variant=f"features-{mode}", feature_mode=mode,
                                     main=True))


def table8(planner: Planner) -> None:
    """Masking rates during pretraining."""
    s = planner.scale
    for row in s.mask_rows:
        model = _ablation_model(planner, rates=paper.TABLE8_RATES[row])
        planner.finetune(FinetuneJob("mnli", model, s.ablation["mnli"],
                                     cells=(Cell("table8", row, "MNLI", "accuracy"),)))
        planner.finetune(FinetuneJob("conll2003", model, s.ablation["conll2003"],
                                     cells=(Cell("table8", row, "NER fine-tune", "ner_f1"),)))
        planner.finetune(FinetuneJob(
            "conll2003", model, s.features,
            cells=(Cell("table8", row, "NER feature-based", "ner_f1"),),
            variant="features-concat_last_four", feature_mode="concat_last_four"))


def figure5(planner: Planner) -> None:
    """Downstream accuracy against pretraining steps, MLM vs LTR."""
    s = planner.scale
    for row, objective in (("MLM", "nsp"), ("LTR", "ltr")):
        model = _ablation_model(planner, objective)
        for step in s.figure5_steps:
            last = step == s.figure5_steps[-1]
            settings = s.figure5_points if s.figure5_points and not last \
                else s.ablation[s.figure5_task]
            run_id = planner.finetune(FinetuneJob(
                s.figure5_task, model, settings,
                cells=(Cell("figure5", row, str(step), "accuracy"),),
                export_step=None if last else step))
            if run_id:
                # The last point is the run Tables 5, 6 and 8 planned already: label it.
                planner.runs[run_id].info["pretrain_step"] = step


EXPERIMENTS = {"table1": table1, "table2": table2, "table3": table3, "table4": table4,
               "table5": table5, "table6": table6, "table7": table7, "table8": table8,
               "figure5": figure5}
TABLES = tuple(EXPERIMENTS)


def build_plan(scale: str, strategy: str = "cpu", data_dir: str = "data",
               work_dir: str = "runs", tables=TABLES, tpu: Optional[str] = None,
               tfds_fallback: bool = False) -> Plan:
    """The plan of a scale.

    Args:
        scale: "paper", "cpu" or "smoke".
        strategy: passed to every CLI; also picks the throughput of the estimates.
        data_dir: the benchmark data root (its pretraining/ and the task files).
        work_dir: where the CLIs write their outputs (shards, checkpoints, metrics).
        tables: restrict to these tables (and what they need).
        tpu: --tpu address for --strategy tpu.
        tfds_fallback: there is no data directory: fine-tuning tasks that
            tensorflow-datasets has read it (`reproduce.plan.Planner`).
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    tables = tuple(tables)
    unknown = set(tables) - set(TABLES)
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}; expected some of {TABLES}")
    # Absolute paths: the same plan from another working directory (or written as
    # ../data vs /abs/data) has the same commands, so its finished runs stay finished.
    if "://" not in work_dir:
        work_dir = os.path.abspath(work_dir)
    planner = Planner(SCALES[scale], strategy, os.path.abspath(data_dir), work_dir, tpu,
                      tfds_fallback)
    # Always every table, so that a run's command does not depend on which tables were
    # asked for (a finished run stays finished under --only).
    for experiment in EXPERIMENTS.values():
        experiment(planner)
    return Plan(scale, strategy, planner.runs, planner.data_dir).select(tables)
