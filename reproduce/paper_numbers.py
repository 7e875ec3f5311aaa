"""Every number the BERT paper reports that the harness compares against, as data.

Source: Devlin, Chang, Lee, Toutanova, "BERT: Pre-training of Deep Bidirectional
Transformers for Language Understanding", NAACL 2019 (arXiv 1810.04805 v2), plus the
reference points the project keeps beside it (google-research/bert README, Hugging Face
run_glue, Turc et al. 2019, ELECTRA, RoBERTa). Values are percentages as printed in the
paper (CoLA MCC 52.1, SQuAD F1 88.5), perplexities as printed, `None` where the paper
prints "–".

The tables are written as literals laid out like the paper's, then flattened into
`NUMBERS`, one `PaperNumber` per cell, so `reproduce.tables` can look up any cell by
(table, row, column).
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class PaperNumber:
    """One cell of one of the paper's tables.

    Args:
        table: "table1" ... "table8", "figure5", or "ref:<source>" for reference points.
        row: the row label as printed ("BERT-BASE", "No NSP", "L3/H768/A12", "80/10/10").
        column: the column label ("MNLI-m", "Dev F1", "LM ppl").
        value: the number as printed.
        split: "dev", "test" or "held-out".
        metric: the glue_suite metric key it corresponds to ("accuracy", "f1", "mcc",
            "spearman", "exact_match", "exact", "ner_f1", "perplexity", "average").
    """
    table: str
    row: str
    column: str
    value: float
    split: str
    metric: str


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    split: str
    metric: str


def _flatten(table: str, columns: tuple, rows: dict) -> list:
    numbers = []
    for row, values in rows.items():
        if len(values) != len(columns):
            raise ValueError(f"{table} row {row!r}: {len(values)} values for {len(columns)} columns")
        for column, value in zip(columns, values):
            if value is not None:
                numbers.append(PaperNumber(table, row, column.name, float(value), column.split,
                                           column.metric))
    return numbers


TITLES = {
    "table1": "Table 1: GLUE (paper: test server; ours: dev)",
    "table2": "Table 2: SQuAD v1.1",
    "table3": "Table 3: SQuAD v2.0",
    "table4": "Table 4: SWAG",
    "table5": "Table 5: ablation over pretraining tasks",
    "table6": "Table 6: model size",
    "table7": "Table 7: CoNLL-2003 NER, fine-tuning and feature-based",
    "table8": "Table 8: masking procedure during pretraining",
    "figure5": "Figure 5: MNLI dev accuracy against pretraining steps, MLM vs LTR",
}

# ---------------------------------------------------------------------------- Table 1
# GLUE test set (evaluation server). F1 for QQP and MRPC, Spearman for STS-B, MCC for
# CoLA, accuracy elsewhere. The average excludes WNLI.
TABLE1_COLUMNS = (
    Column("MNLI-m", "test", "accuracy"), Column("MNLI-mm", "test", "accuracy"),
    Column("QQP", "test", "f1"), Column("QNLI", "test", "accuracy"),
    Column("SST-2", "test", "accuracy"), Column("CoLA", "test", "mcc"),
    Column("STS-B", "test", "spearman"), Column("MRPC", "test", "f1"),
    Column("RTE", "test", "accuracy"), Column("Avg", "test", "average"))
TABLE1 = {
    #                     MNLI-m MNLI-mm QQP  QNLI  SST-2 CoLA  STS-B MRPC  RTE   Avg
    "Pre-OpenAI SOTA":   (80.6, 80.1, 66.1, 82.3, 93.2, 35.0, 81.0, 86.0, 61.7, 74.0),
    "BiLSTM+ELMo+Attn":  (76.4, 76.1, 64.8, 79.8, 90.4, 36.0, 73.3, 84.9, 56.8, 71.0),
    "OpenAI GPT":        (82.1, 81.4, 70.3, 87.4, 91.3, 45.4, 80.0, 82.3, 56.0, 75.1),
    "BERT-BASE":         (84.6, 83.4, 71.2, 90.5, 93.5, 52.1, 85.8, 88.9, 66.4, 79.6),
    "BERT-LARGE":        (86.7, 85.9, 72.1, 92.7, 94.9, 60.5, 86.5, 89.3, 70.1, 82.1),
}
# The "(train size)" row of Table 1: training examples per task.
GLUE_TRAIN_SIZES = {"MNLI": 392_000, "QQP": 363_000, "QNLI": 108_000, "SST-2": 67_000,
                    "CoLA": 8_500, "STS-B": 5_700, "MRPC": 3_500, "RTE": 2_500}

# ------------------------------------------------------------------------- Tables 2-4
SQUAD_COLUMNS = (Column("Dev EM", "dev", "exact_match"), Column("Dev F1", "dev", "f1"),
                 Column("Test EM", "test", "exact_match"), Column("Test F1", "test", "f1"))
TABLE2 = {
    #                                    Dev EM  Dev F1  Test EM Test F1
    "BERT-BASE (single)":               (80.8,   88.5,   None,   None),
    "BERT-LARGE (single)":              (84.1,   90.9,   None,   None),
    "BERT-LARGE (ensemble)":            (85.8,   91.8,   None,   None),
    "BERT-LARGE (single + TriviaQA)":   (84.2,   91.1,   85.1,   91.8),
    "BERT-LARGE (ensemble + TriviaQA)": (86.2,   92.2,   87.4,   93.2),
    "Human":                            (None,   None,   82.3,   91.2),
}
# SQuAD v2.0: the official v2.0 script calls exact match "exact".
SQUAD2_COLUMNS = (Column("Dev EM", "dev", "exact"), Column("Dev F1", "dev", "f1"),
                  Column("Test EM", "test", "exact"), Column("Test F1", "test", "f1"))
TABLE3 = {
    "BERT-LARGE (single)": (78.7, 81.9, 80.0, 83.1),
    "Human":               (86.3, 89.0, 86.9, 89.5),
}
SWAG_COLUMNS = (Column("Dev", "dev", "accuracy"), Column("Test", "test", "accuracy"))
TABLE4 = {
    "ESIM+ELMo":  (59.1, 59.2),
    "OpenAI GPT": (None, 78.0),
    "BERT-BASE":  (81.6, None),
    "BERT-LARGE": (86.6, 86.3),
}

# ---------------------------------------------------------------------------- Table 5
# BERT-BASE architecture, dev. LTR is left-only during fine-tuning too; "+ BiLSTM" is a
# randomly initialised BiLSTM added at fine-tuning on top of the LTR model.
TABLE5_COLUMNS = (Column("MNLI-m", "dev", "accuracy"), Column("QNLI", "dev", "accuracy"),
                  Column("MRPC", "dev", "accuracy"), Column("SST-2", "dev", "accuracy"),
                  Column("SQuAD F1", "dev", "f1"))
TABLE5 = {
    #                MNLI-m QNLI  MRPC  SST-2 SQuAD
    "BERT-BASE":    (84.4, 88.4, 86.7, 92.7, 88.5),
    "No NSP":       (83.9, 84.9, 86.5, 92.6, 87.9),
    "LTR & No NSP": (82.1, 84.3, 77.5, 92.1, 77.8),
    "+ BiLSTM":     (82.1, 84.1, 75.7, 91.6, 84.9),
}

# ---------------------------------------------------------------------------- Table 6
# Dev accuracy, mean of 5 fine-tuning restarts; LM ppl = held-out masked-LM perplexity.
TABLE6_COLUMNS = (Column("LM ppl", "held-out", "perplexity"),
                  Column("MNLI-m", "dev", "accuracy"), Column("MRPC", "dev", "accuracy"),
                  Column("SST-2", "dev", "accuracy"))
TABLE6_SIZES = {  # row label -> (L, H, A) and the bert_tf.config.SIZES name
    "L3/H768/A12": ((3, 768, 12), "L3_H768_A12"),
    "L6/H768/A3": ((6, 768, 3), "L6_H768_A3"),
    "L6/H768/A12": ((6, 768, 12), "L6_H768_A12"),
    "L12/H768/A12": ((12, 768, 12), "base"),
    "L12/H1024/A16": ((12, 1024, 16), "L12_H1024_A16"),
    "L24/H1024/A16": ((24, 1024, 16), "large"),
}
TABLE6 = {
    #                 LM ppl MNLI-m MRPC  SST-2
    "L3/H768/A12":   (5.84, 77.9, 79.8, 88.4),
    "L6/H768/A3":    (5.24, 80.6, 82.2, 90.7),
    "L6/H768/A12":   (4.68, 81.9, 84.8, 91.3),
    "L12/H768/A12":  (3.99, 84.4, 86.7, 92.9),
    "L12/H1024/A16": (3.54, 85.7, 86.9, 93.3),
    "L24/H1024/A16": (3.23, 86.6, 87.8, 93.7),
}

# ---------------------------------------------------------------------------- Table 7
# CoNLL-2003 NER F1, mean of 5 restarts. Cased WordPiece, maximal document context, first
# sub-token classified, no CRF. Feature-based: frozen BERT-BASE, 2-layer 768-dim BiLSTM.
NER_COLUMNS = (Column("Dev F1", "dev", "ner_f1"), Column("Test F1", "test", "ner_f1"))
TABLE7 = {
    "Fine-tune BERT-LARGE":          (96.6, 92.8),
    "Fine-tune BERT-BASE":           (96.4, 92.4),
    "Feature-based BERT-BASE: embeddings":     (91.0, None),
    "second-to-last hidden":         (95.6, None),
    "last hidden":                   (94.9, None),
    "weighted sum last four hidden": (95.9, None),
    "concat last four hidden":       (96.1, None),
    "weighted sum all 12 layers":    (95.5, None),
}
# Table 7 feature-based row -> glue_suite.run --feature_mode value.
TABLE7_FEATURE_MODES = {
    "Feature-based BERT-BASE: embeddings": "embeddings",
    "second-to-last hidden": "second_to_last",
    "last hidden": "last",
    "weighted sum last four hidden": "weighted_sum_last_four",
    "concat last four hidden": "concat_last_four",
    "weighted sum all 12 layers": "weighted_sum_all",
}

# ---------------------------------------------------------------------------- Table 8
# Appendix C.2, dev. Rows: fractions of the selected 15% replaced by [MASK] / kept the
# same / replaced by a random token.
TABLE8_COLUMNS = (Column("MNLI", "dev", "accuracy"),
                  Column("NER fine-tune", "dev", "ner_f1"),
                  Column("NER feature-based", "dev", "ner_f1"))
TABLE8_RATES = {  # row label -> --mask_rates (MASK, SAME, RND)
    "80/10/10": (0.8, 0.1, 0.1),
    "100/0/0": (1.0, 0.0, 0.0),
    "80/0/20": (0.8, 0.0, 0.2),
    "80/20/0": (0.8, 0.2, 0.0),
    "0/20/80": (0.0, 0.2, 0.8),
    "0/0/100": (0.0, 0.0, 1.0),
}
TABLE8 = {
    #             MNLI  NER-ft NER-feat (concat last four)
    "80/10/10": (84.2, 95.4, 94.9),
    "100/0/0":  (84.3, 94.9, 94.0),
    "80/0/20":  (84.1, 95.2, 94.6),
    "80/20/0":  (84.4, 95.2, 94.7),
    "0/20/80":  (83.7, 94.8, 94.6),
    "0/0/100":  (83.6, 94.9, 94.6),
}

# --------------------------------------------------------------------------- Figure 5
# Only text: "BERT-BASE achieves almost 1.0% additional accuracy on MNLI when trained on
# 1M steps compared to 500k steps"; "the MLM model converges slightly slower than LTR ...
# but outperforms it in absolute accuracy almost immediately". The x-axis of the figure
# runs from 200k to 1M steps.
FIGURE5_NOTE = ("paper (text only): BERT-BASE gains almost 1.0% MNLI accuracy at 1M vs 500k "
                "steps; MLM converges slightly slower than LTR but outperforms it in "
                "absolute accuracy almost immediately")
FIGURE5 = [PaperNumber("figure5", "BERT-BASE (MLM)", "MNLI gain 1M vs 500k steps", 1.0, "dev",
                       "accuracy")]
FIGURE5_STEPS = (200_000, 400_000, 600_000, 800_000, 1_000_000)

# ----------------------------------------------------------------------- hyperparameters
MODEL = {"vocab_size": 30_522, "ffn_multiplier": 4, "activation": "gelu", "dropout": 0.1,
         "max_position_embeddings": 512, "type_vocab_size": 2,
         "base_parameters": 110e6, "large_parameters": 340e6}
PRETRAINING = {
    "batch_size": 256, "num_train_steps": 1_000_000, "learning_rate": 1e-4,
    "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-6, "weight_decay": 0.01,
    "num_warmup_steps": 10_000,
    "phase1_seq_length": 128, "phase1_fraction": 0.9, "phase2_seq_length": 512,
    "masked_lm_prob": 0.15, "mask_rates": (0.8, 0.1, 0.1), "next_sentence_fraction": 0.5,
    # google-research/bert defaults
    "dupe_factor": 10, "short_seq_prob": 0.1,
    "max_predictions_per_seq": {128: 20, 512: 80},
    "final_nsp_accuracy": (97.0, 98.0),
    # hardware: Cloud TPUs x days, for 1M steps
    "tpu_days": {"base": (4, 4), "large": (16, 4)},  # (Cloud TPUs, days)
    "tpu_chips": {"base": 16, "large": 64},
    "corpus_words": {"BooksCorpus": 800e6, "Wikipedia": 2_500e6},
}
FINETUNING = {
    "grid": {"batch_size": (16, 32), "learning_rate": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)},
    "glue": {"batch_size": 32, "epochs": 3, "learning_rates": (5e-5, 4e-5, 3e-5, 2e-5)},
    "squad1.1": {"batch_size": 32, "epochs": 3, "learning_rates": (5e-5,),
                 "max_seq_length": 384, "doc_stride": 128, "max_query_length": 64,
                 "n_best_size": 20, "max_answer_length": 30},
    "squad2.0": {"batch_size": 48, "epochs": 2, "learning_rates": (5e-5,),
                 "max_seq_length": 384},
    "swag": {"batch_size": 16, "epochs": 3, "learning_rates": (2e-5,)},
    # Table 6 and Table 7: "mean of 5 fine-tuning restarts"
    "restarts": 5,
}

# ---------------------------------------------------------------------- reference points
# Not from the paper; kept beside it as sanity ranges (dev unless stated).
REFERENCES = [
    # google-research/bert README
    PaperNumber("ref:google-bert", "BERT-Base MRPC (lowest rerun)", "accuracy", 84.0, "dev", "accuracy"),
    PaperNumber("ref:google-bert", "BERT-Base MRPC (highest rerun)", "accuracy", 88.0, "dev", "accuracy"),
    PaperNumber("ref:google-bert", "BERT-Base SQuAD 1.1", "f1", 88.41, "dev", "f1"),
    PaperNumber("ref:google-bert", "BERT-Base SQuAD 1.1", "exact_match", 81.25, "dev", "exact_match"),
    PaperNumber("ref:google-bert", "BERT-Large SQuAD 1.1", "f1", 90.87, "dev", "f1"),
    PaperNumber("ref:google-bert", "BERT-Large SQuAD 1.1", "exact_match", 84.39, "dev", "exact_match"),
    # Hugging Face run_glue, bert-base-cased, dev
    *_flatten("ref:hf-run_glue", (Column("CoLA", "dev", "mcc"), Column("SST-2", "dev", "accuracy"),
                                  Column("MRPC F1", "dev", "f1"), Column("MRPC acc", "dev", "accuracy"),
                                  Column("STS-B pearson", "dev", "pearson"),
                                  Column("STS-B spearman", "dev", "spearman"),
                                  Column("QQP acc", "dev", "accuracy"), Column("QQP F1", "dev", "f1"),
                                  Column("MNLI-m", "dev", "accuracy"), Column("MNLI-mm", "dev", "accuracy"),
                                  Column("QNLI", "dev", "accuracy"), Column("RTE", "dev", "accuracy"),
                                  Column("WNLI", "dev", "accuracy")),
              {"bert-base-cased": (56.53, 92.32, 88.85, 84.07, 88.64, 88.48, 90.71, 87.49,
                                   83.91, 84.10, 90.66, 65.70, 56.34)}),
    # Degenerate MRPC: predicting "paraphrase" for every pair.
    PaperNumber("ref:degenerate", "MRPC all-positive", "accuracy", 68.4, "dev", "accuracy"),
    PaperNumber("ref:degenerate", "MRPC all-positive", "f1", 81.2, "dev", "f1"),
    # RoBERTa Table 2 (base, dev): NSP removal does not hurt at that scale.
    *_flatten("ref:roberta", (Column("SQuAD 1.1 F1", "dev", "f1"), Column("SQuAD 2.0 F1", "dev", "f1"),
                              Column("MNLI-m", "dev", "accuracy"), Column("SST-2", "dev", "accuracy")),
              {"SEGMENT-PAIR+NSP": (90.4, 78.7, 84.0, 92.9),
               "FULL-SENTENCES": (90.4, 79.1, 84.7, 92.5)}),
]
# Small BERTs (Turc et al. 2019, google-research/bert README), GLUE *test*; MRPC F1/acc,
# STS-B Pearson/Spearman, QQP F1/acc.
SMALL_BERT_COLUMNS = (
    Column("Score", "test", "average"), Column("CoLA", "test", "mcc"),
    Column("SST-2", "test", "accuracy"), Column("MRPC F1", "test", "f1"),
    Column("MRPC acc", "test", "accuracy"), Column("STS-B pearson", "test", "pearson"),
    Column("STS-B spearman", "test", "spearman"), Column("QQP F1", "test", "f1"),
    Column("QQP acc", "test", "accuracy"), Column("MNLI-m", "test", "accuracy"),
    Column("MNLI-mm", "test", "accuracy"), Column("QNLI", "test", "accuracy"),
    Column("RTE", "test", "accuracy"))
SMALL_BERTS = {
    # row label = bert_tf.config.SIZES name
    "tiny":   (64.2, 0.0, 83.2, 81.1, 71.1, 74.3, 73.6, 62.2, 83.4, 70.2, 70.3, 81.5, 57.2),
    "mini":   (65.8, 0.0, 85.9, 81.1, 71.8, 75.4, 73.3, 66.4, 86.2, 74.8, 74.3, 84.1, 57.9),
    "small":  (71.2, 27.8, 89.7, 83.4, 76.2, 78.8, 77.0, 68.1, 87.0, 77.6, 77.0, 86.4, 61.8),
    "medium": (73.5, 38.0, 89.6, 86.6, 81.6, 80.4, 78.4, 69.6, 87.9, 80.0, 79.1, 87.7, 62.2),
}
REFERENCES += _flatten("ref:small-berts", SMALL_BERT_COLUMNS, SMALL_BERTS)
# Fine-tuning standard deviation over 10 runs (ELECTRA-Small), dev.
FINETUNING_STD = {"CoLA": 1.30, "SST-2": 0.49, "MRPC": 0.7, "STS-B": 0.29, "QQP": 0.1,
                  "MNLI": 0.15, "QNLI": 0.33, "RTE": 1.93}
SQUAD2_NULL_THRESHOLD_RANGE = (-5.0, -1.0)  # google-research/bert README

# ------------------------------------------------------------------------------ lookups
_TABLES = {
    "table1": (TABLE1_COLUMNS, TABLE1), "table2": (SQUAD_COLUMNS, TABLE2),
    "table3": (SQUAD2_COLUMNS, TABLE3), "table4": (SWAG_COLUMNS, TABLE4),
    "table5": (TABLE5_COLUMNS, TABLE5), "table6": (TABLE6_COLUMNS, TABLE6),
    "table7": (NER_COLUMNS, TABLE7), "table8": (TABLE8_COLUMNS, TABLE8),
}
NUMBERS: list = [n for name, (cols, rows) in _TABLES.items() for n in _flatten(name, cols, rows)]
NUMBERS += FIGURE5

_INDEX = {(n.table, n.row, n.column): n for n in NUMBERS + REFERENCES}


def columns(table: str) -> tuple:
    """The `Column`s of one of the paper's tables, in the paper's order."""
    return _TABLES[table][0]


def rows(table: str) -> tuple:
    """The row labels of one of the paper's tables, in the paper's order."""
    return tuple(_TABLES[table][1])


def lookup(table: str, row: str, column: str) -> Optional[PaperNumber]:
    """The paper's number for one cell, or None where the paper prints none."""
    return _INDEX.get((table, row, column))


# The rows of each table that this harness reproduces: BERT's own (the other rows are
# baselines of other systems, printed for reference).
REPRODUCED_ROWS = {
    "table1": ("BERT-BASE", "BERT-LARGE"),
    "table2": ("BERT-BASE (single)", "BERT-LARGE (single)"),
    "table3": ("BERT-LARGE (single)",),
    "table4": ("BERT-BASE", "BERT-LARGE"),
    "table5": rows("table5"), "table6": rows("table6"),
    "table7": rows("table7"), "table8": rows("table8"),
    "figure5": ("MLM", "LTR"),
}
