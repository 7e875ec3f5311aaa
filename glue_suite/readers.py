"""Raw benchmark files -> examples: the first stage of every fine-tuning run.

`read_examples(task, split, data_dir)` finds the file for a split in the standard layout
below, reads it, checks every row and returns `(examples, num_bad_rows)`:

    glue_data/<CoLA|SST-2|MRPC|STS-B|QQP|QNLI|RTE|WNLI>/{train,dev,test}.tsv
    glue_data/MNLI/{train,dev_matched,dev_mismatched,test_matched,test_mismatched}.tsv
        train falls back to train.random-subset-20000.tokenized.tsv (20k pairs),
        dev to multinli_1.0/multinli_1.0_dev_{matched,mismatched}.csv
    glue_data/diagnostic/diagnostic.tsv        (split "ax" of mnli)
    squad/v1.1/{train-v1.1.json,dev-v1.1.json} (train falls back to
        train-v1.1.reconstructed.json.gz); squad/v2.0/{train,dev}-v2.0.json; any as .gz
    swag/{train,val,test}.csv                  (splits train, dev, test)
    conll2003/eng.{train,testa,testb}          (IOB1; else bio/{train,valid,test}.txt)

A missing file raises `MissingDataError`; a malformed row raises `DataFormatError` naming
file and line, unless `skip_bad_rows=True`, which skips and counts it.
"""

import csv
import dataclasses
import gzip
import json
import logging
import os
import re
from typing import Optional, Sequence, Union

import numpy as np

from glue_suite.data_dir import MissingDataError, find_file  # noqa: F401 (re-exported)
from glue_suite.tasks import REGRESSION, get_task

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class InputExample:
    """One GLUE sentence or sentence pair.

    Args:
        guid: the file's `index` (`id` for QQP) column, else the 0-based data-row
            number; the key of prediction and leaderboard files.
        text_a: first sentence.
        text_b: second sentence, None for single-sentence tasks.
        label: a string of `TaskSpec.labels`, a float for STS-B, None on test splits.
    """
    guid: str
    text_a: str
    text_b: Optional[str]
    label: Union[str, float, None]


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question, with its context split as google-research/bert splits it.

    Args:
        qas_id: the question id (key of prediction files).
        question_text: the question.
        context_text: the paragraph.
        doc_tokens: the paragraph split on whitespace (space, tab, CR, LF, U+202F);
            shared by all questions of the paragraph.
        char_to_word_offset: for every character of the paragraph, the index of the
            doc token it belongs to (whitespace maps to the preceding token).
        answers: gold answer texts (dev keeps all of them; empty if unanswerable).
        is_impossible: SQuAD v2.0 unanswerable question (read on dev too, where the
            original leaves it False; features for evaluation do not use it).
        start_position: training only: first doc token of the answer (-1 if impossible).
        end_position: training only: last doc token of the answer (-1 if impossible).
    """
    qas_id: str
    question_text: str
    context_text: str
    doc_tokens: tuple[str, ...]
    char_to_word_offset: tuple[int, ...]
    answers: tuple[str, ...]
    is_impossible: bool
    start_position: Optional[int] = None
    end_position: Optional[int] = None

    @property
    def orig_answer_text(self) -> str:
        """The training answer, as the original `SquadExample.orig_answer_text`."""
        return self.answers[0] if self.answers and not self.is_impossible else ""


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG question: a context and four candidate endings of `start_ending`.

    Args:
        guid: the file's unnamed first (row index) column, else the data-row number.
        context: `sent1`.
        start_ending: `sent2`, the shared beginning of every ending.
        endings: `ending0` .. `ending3`.
        label: index of the gold ending, None on the test split.
    """
    guid: str
    context: str
    start_ending: str
    endings: tuple[str, str, str, str]
    label: Optional[int]


@dataclasses.dataclass(frozen=True)
class NerSentence:
    """One CoNLL-2003 sentence; `doc_id` groups sentences into documents (0-based, in
    file order), because the NER features use the surrounding document as context.

    Args:
        doc_id: index of the -DOCSTART- document the sentence belongs to.
        words: the tokens.
        tags: BIO tags, one per word (IOB1 files are converted on reading).
    """
    doc_id: int
    words: tuple[str, ...]
    tags: tuple[str, ...]


Example = Union[InputExample, SquadExample, SwagExample, NerSentence]


class DataFormatError(ValueError):
    """A malformed row; the message starts with `file:line:` (or `file: question ID:`)."""

    def __init__(self, path: str, where: Union[int, str], message: str):
        self.path, self.where = path, where
        location = f"line {where}" if isinstance(where, int) else where
        super().__init__(f"{path}: {location}: {message}")


class _BadRows:
    """Raises on a malformed row, or counts it when skipping is allowed."""

    def __init__(self, path: str, skip: bool):
        self.path, self.skip, self.count = path, skip, 0

    def __call__(self, where: Union[int, str], message: str) -> None:
        if not self.skip:
            raise DataFormatError(
                self.path, where, message + " (pass skip_bad_rows=True to skip such rows)")
        self.dropped(where, message)

    def dropped(self, where: Union[int, str], message: str) -> None:
        """Counts a row that is always dropped (SQuAD answers lost to tokenization)."""
        self.count += 1
        if self.count <= 5:
            logger.warning("skipping: %s", DataFormatError(self.path, where, message))


# ---------------------------------------------------------------------------------------
# The layout: task -> split -> candidate files (official first)
# ---------------------------------------------------------------------------------------

def _glue_files(subdir: str) -> dict[str, list[str]]:
    return {s: [f"glue_data/{subdir}/{s}.tsv"] for s in ("train", "dev", "test")}


def _with_gz(*paths: str) -> list[str]:
    return [p for path in paths for p in (path, path + ".gz")]


_FILES: dict[str, dict[str, list[str]]] = {
    "cola": _glue_files("CoLA"),
    "sst2": _glue_files("SST-2"),
    "mrpc": _glue_files("MRPC"),
    "stsb": _glue_files("STS-B"),
    "qqp": _glue_files("QQP"),
    "mnli": {
        "train": ["glue_data/MNLI/train.tsv",
                  "glue_data/MNLI/train.random-subset-20000.tokenized.tsv"],
        "dev_matched": ["glue_data/MNLI/dev_matched.tsv",
                        "multinli_1.0/multinli_1.0_dev_matched.csv"],
        "dev_mismatched": ["glue_data/MNLI/dev_mismatched.tsv",
                           "multinli_1.0/multinli_1.0_dev_mismatched.csv"],
        "test_matched": ["glue_data/MNLI/test_matched.tsv"],
        "test_mismatched": ["glue_data/MNLI/test_mismatched.tsv"],
        "ax": ["glue_data/diagnostic/diagnostic.tsv"],
    },
    "qnli": _glue_files("QNLI"),
    "rte": _glue_files("RTE"),
    "wnli": _glue_files("WNLI"),
    "squad1.1": {
        "train": _with_gz("squad/v1.1/train-v1.1.json") +
                 ["squad/v1.1/train-v1.1.reconstructed.json.gz"],
        "dev": _with_gz("squad/v1.1/dev-v1.1.json"),
    },
    "squad2.0": {"train": _with_gz("squad/v2.0/train-v2.0.json"),
                 "dev": _with_gz("squad/v2.0/dev-v2.0.json")},
    "swag": {"train": ["swag/train.csv"], "dev": ["swag/val.csv"], "test": ["swag/test.csv"]},
    "conll2003": {"train": ["conll2003/eng.train", "conll2003/bio/train.txt"],
                  "dev": ["conll2003/eng.testa", "conll2003/bio/valid.txt"],
                  "test": ["conll2003/eng.testb", "conll2003/bio/test.txt"]},
}

_DATASET = {"mnli": "mnli", "squad1.1": "squad", "squad2.0": "squad", "swag": "swag",
            "conll2003": "conll2003"}  # everything else: glue
_UNLABELLED_SPLITS = ("test", "test_matched", "test_mismatched", "ax")


def splits(task: str) -> tuple[str, ...]:
    """The split names `read_examples` accepts for `task`."""
    get_task(task)
    return tuple(_FILES[task])


def is_labelled(task: str, split: str) -> bool:
    """GLUE and SWAG test splits are unlabelled; CoNLL-2003's test set is labelled."""
    return task == "conll2003" or split not in _UNLABELLED_SPLITS


def data_path(task: str, split: str, data_dir: str) -> str:
    """The file `read_examples(task, split, data_dir)` reads (record it with results).

    Raises:
        MissingDataError: no candidate file exists; the message gives the layout.
    """
    files = _FILES[get_task(task).name]
    if split not in files:
        raise ValueError(f"task {task} has no split {split!r}; splits: {', '.join(files)}")
    layout = "; ".join(f"{s}: {' or '.join(c)}" for s, c in files.items())
    path = find_file(data_dir, files[split], dataset=_DATASET.get(task, "glue"),
                     layout=layout)
    if not path.endswith(files[split][0]) and not path.endswith(files[split][0] + ".gz"):
        # e.g. the 20k MNLI train subset or the reconstructed SQuAD train: say so.
        logger.warning("%s %s: %s is absent, reading %s", task, split, files[split][0], path)
    return path


def read_examples(task: str, split: str, data_dir: str,
                  skip_bad_rows: bool = False) -> tuple[list[Example], int]:
    """Reads one split of a task from the standard layout under `data_dir`.

    Returns:
        (examples, num_bad_rows). `num_bad_rows` counts the rows skipped because
        `skip_bad_rows` was set, plus, for SQuAD training, the answers that cannot be
        recovered from the whitespace tokens (dropped as by google-research/bert).
    """
    return read_file(task, split, data_path(task, split, data_dir), skip_bad_rows)


def read_file(task: str, split: str, path: str,
              skip_bad_rows: bool = False) -> tuple[list[Example], int]:
    """Reads `path` as the `split` of `task` (e.g. a dev file given on a command line).

    `split` decides whether labels are required (not on GLUE/SWAG test splits) and
    whether SQuAD answer positions are computed ("train").
    """
    spec = get_task(task)
    if not os.path.isfile(path):
        raise MissingDataError(f"missing data file: {path}")
    bad = _BadRows(path, skip_bad_rows)
    labelled = is_labelled(task, split)
    if spec.kind == "span":
        examples = _read_squad(path, version_2=(task == "squad2.0"),
                               training=(split == "train"), bad=bad)
    elif task == "swag":
        examples = _read_swag(path, labelled, bad)
    elif task == "conll2003":
        examples = _read_conll(path, spec.labels, bad)
    elif task == "mnli" and path.endswith(".csv"):
        examples = _read_multinli_csv(path, spec.labels, bad)
    else:
        examples = _read_glue_tsv(task, path, labelled, bad)
    if bad.count:
        logger.warning("%s: %d bad rows skipped", path, bad.count)
    return examples, bad.count


# ---------------------------------------------------------------------------------------
# GLUE
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _GlueColumns:
    text_a: str
    text_b: Optional[str]
    labels: tuple[str, ...]  # label column names, the first one present is used
    no_header: Optional[tuple[str, ...]] = None  # column names of header-less files


_GLUE_COLUMNS = {
    # CoLA train/dev have no header: source, label, original label ("*"), sentence.
    "cola": _GlueColumns("sentence", None, ("label",),
                         no_header=("source", "label", "original_label", "sentence")),
    "sst2": _GlueColumns("sentence", None, ("label",)),
    "mrpc": _GlueColumns("#1 String", "#2 String", ("Quality",)),
    "stsb": _GlueColumns("sentence1", "sentence2", ("score",)),
    "qqp": _GlueColumns("question1", "question2", ("is_duplicate",)),
    # GLUE's MNLI files have label1 ... gold_label; the 20k train subset has `label`.
    "mnli": _GlueColumns("sentence1", "sentence2", ("gold_label", "label")),
    "qnli": _GlueColumns("question", "sentence", ("label",)),
    "rte": _GlueColumns("sentence1", "sentence2", ("label",)),
    "wnli": _GlueColumns("sentence1", "sentence2", ("label",)),
}


def _read_lines(path: str) -> list[str]:
    """Lines split on "\\n" only: str.splitlines() would also split on \\x0b, \\x1c,
    U+2028 ..., which can occur inside a sentence. utf-8-sig drops a leading BOM."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = f.read().split("\n")
    if lines[-1] == "":  # final newline (absent in e.g. CoLA/dev.tsv)
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _parse_label(raw: str, task_labels: tuple[str, ...], regression: bool):
    """Returns (label, None), or (None, what is wrong)."""
    if regression:
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not np.isfinite(value):
            return None, f"label {raw!r} is not a finite number"
        return value, None
    if raw not in task_labels:
        return None, f"label {raw!r} not in the task's labels {list(task_labels)}"
    return raw, None


def _read_glue_tsv(task: str, path: str, labelled: bool, bad: _BadRows) -> list[InputExample]:
    """GLUE TSV as written by download_glue_data.py: tab-separated, no quoting."""
    spec, cols = get_task(task), _GLUE_COLUMNS[task]
    lines = _read_lines(path)
    if cols.no_header and labelled:
        header, first_row_line = cols.no_header, 1
    else:
        if not lines:
            raise DataFormatError(path, 1, "empty file; expected a header line")
        header, first_row_line, lines = tuple(lines[0].split("\t")), 2, lines[1:]
    column = {name: i for i, name in enumerate(header)}
    layout = f"GLUE {task} columns {cols.text_a!r}" + (
        f", {cols.text_b!r}" if cols.text_b else "") + (
        f", label {' or '.join(map(repr, cols.labels))}" if labelled else "")

    def require(name):
        if name not in column:
            raise DataFormatError(path, 1, f"no column {name!r} in header {list(header)}; "
                                           f"expected {layout}")
        return column[name]

    a, b = require(cols.text_a), (require(cols.text_b) if cols.text_b else None)
    label_col = None
    if labelled:
        present = [c for c in cols.labels if c in column]
        label_col = require(present[0] if present else cols.labels[0])
    index_col = column.get("index", column.get("id"))
    regression = spec.kind == REGRESSION

    examples = []
    for row, line in enumerate(lines):
        lineno = row + first_row_line
        if not line:
            continue  # a blank line is not a row
        fields = line.split("\t")
        if len(fields) != len(header):
            bad(lineno, f"expected {len(header)} tab-separated fields, found {len(fields)}")
            continue
        label = None
        if labelled:
            label, error = _parse_label(fields[label_col], spec.labels, regression)
            if error:
                bad(lineno, error)
                continue
        guid = fields[index_col] if index_col is not None else str(row)
        examples.append(InputExample(guid, fields[a], fields[b] if b is not None else None,
                                     label))
    return examples


def _csv_rows(reader, header: list, bad: "_BadRows"):
    """(row number, file line, fields) of a csv.reader's data rows; blank lines are
    skipped and rows with the wrong field count reported to `bad`."""
    for row, fields in enumerate(reader):
        if not fields:
            continue
        if len(fields) != len(header):
            bad(reader.line_num, f"expected {len(header)} CSV fields, found {len(fields)}")
            continue
        yield row, reader.line_num, fields


def _read_multinli_csv(path: str, labels: tuple[str, ...], bad: _BadRows) -> list[InputExample]:
    """MultiNLI 1.0 dev CSV (pairID, sentence1, sentence2, label), standard CSV quoting.

    Rows with gold label "-" (no annotator majority) are dropped, as GLUE drops them.
    guid numbers the kept rows 0, 1, ..., which is the `index` of GLUE's dev files.
    """
    examples = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise DataFormatError(path, 1, "empty file; expected a header line")
        column = {name: i for i, name in enumerate(header)}
        label_name = next((c for c in ("label", "gold_label") if c in column), None)
        for name in ("sentence1", "sentence2", label_name):
            if name not in column:
                raise DataFormatError(path, 1, f"header {header} lacks {name or 'label'!r}; "
                                               "expected pairID,sentence1,sentence2,label")
        for _, lineno, fields in _csv_rows(reader, header, bad):
            label = fields[column[label_name]]
            if label == "-":
                continue
            if label not in labels:
                bad(lineno, f"label {label!r} not in the task's labels {list(labels)}")
                continue
            examples.append(InputExample(str(len(examples)), fields[column["sentence1"]],
                                         fields[column["sentence2"]], label))
    return examples


def example_labels(task: str, examples: Sequence[Example]) -> np.ndarray:
    """Gold labels as an array: class ids [N] int64, or scores [N] float64 for STS-B."""
    spec = get_task(task)
    if spec.kind == REGRESSION:
        return np.array([ex.label for ex in examples], dtype=np.float64)
    if task == "swag":
        return np.array([ex.label for ex in examples], dtype=np.int64)
    index = {label: i for i, label in enumerate(spec.labels)}
    return np.array([index[ex.label] for ex in examples], dtype=np.int64)


def write_glue_submission(task: str, examples: Sequence[Union[InputExample, SwagExample]],
                          predictions, path: str) -> None:
    """Writes `index<TAB>prediction` rows, the GLUE leaderboard format.

    Serves dev predictions as well; `glue_suite.evaluate` scores such a file.

    Args:
        task: a classification, regression or multiple-choice task.
        examples: the examples predicted, in order; their guid is the index.
        predictions: class ids [N] (written as the task's label strings), or scores [N]
            for STS-B (written exactly, so re-scoring the file reproduces the metrics).
        path: output file (e.g. `<output_dir>/STS-B.tsv`).
    """
    spec = get_task(task)
    predictions = np.asarray(predictions)
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
    if spec.kind == REGRESSION:
        values = [repr(float(p)) for p in predictions]
    else:
        values = [spec.labels[int(p)] for p in predictions]
    with open(path, "w", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        for ex, value in zip(examples, values):
            f.write(f"{ex.guid}\t{value}\n")


def read_predictions(task: str, path: str) -> dict[str, Union[str, float]]:
    """Reads an `index<TAB>prediction` file -> {index: label string or float score}."""
    spec = get_task(task)
    lines = _read_lines(path)
    if not lines or lines[0].split("\t") != ["index", "prediction"]:
        raise DataFormatError(path, 1, "expected the header 'index<TAB>prediction'")
    predictions = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataFormatError(path, lineno, f"expected 2 tab-separated fields, "
                                                f"found {len(fields)}")
        index, raw = fields
        if index in predictions:
            raise DataFormatError(path, lineno, f"index {index!r} occurs twice")
        value, error = _parse_label(raw, spec.labels, spec.kind == REGRESSION)
        if error:
            raise DataFormatError(path, lineno, "prediction " + error)
        predictions[index] = value
    return predictions


# ---------------------------------------------------------------------------------------
# SQuAD
# ---------------------------------------------------------------------------------------

# google-research/bert's run_squad.py splits contexts on these characters only; U+202F
# (narrow no-break space) counts, other Unicode spaces do not.
_SQUAD_WHITESPACE = " \t\r\n\u202f"
_SQUAD_TOKEN = re.compile(f"[^{_SQUAD_WHITESPACE}]+")
_SQUAD_WHITESPACE_CODES = tuple(ord(c) for c in _SQUAD_WHITESPACE)


def split_context(context: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """google-research/bert's whitespace split: (doc_tokens, char_to_word_offset).

    Vectorised form of the original per-character loop (a test checks they agree):
    a token starts at every non-whitespace character after whitespace (or at the
    start), and each character maps to the number of tokens started so far, minus one.
    """
    doc_tokens = tuple(_SQUAD_TOKEN.findall(context))
    codes = np.frombuffer(context.encode("utf-32-le", "surrogatepass"), np.uint32)  # [chars]
    is_space = np.zeros(len(codes), dtype=bool)
    for code in _SQUAD_WHITESPACE_CODES:  # 5 vector compares beat np.isin on short input
        is_space |= codes == code
    starts = ~is_space & np.concatenate([[True], is_space[:-1]])
    char_to_word_offset = np.cumsum(starts) - 1
    return doc_tokens, tuple(char_to_word_offset.tolist())


def load_squad_json(path: str) -> dict:
    """The parsed SQuAD JSON (`{"version", "data"}`), gzip-compressed or not."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as f:
            dataset = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, e.lineno, f"not valid JSON: {e.msg}") from None
    if not isinstance(dataset, dict) or "data" not in dataset:
        raise DataFormatError(path, 1, 'expected a SQuAD file {"version": ..., "data": [...]}')
    return dataset


def _read_squad(path: str, version_2: bool, training: bool, bad: _BadRows):
    return _squad_examples(load_squad_json(path)["data"], version_2, training, bad)


def squad_examples(articles: list, *, version_2: bool, training: bool,
                   skip_bad_rows: bool = False,
                   source: str = "<squad articles>") -> tuple[list[SquadExample], int]:
    """SQuAD `data` articles -> (examples, num_bad_rows), as `read_examples` builds them.

    Args:
        articles: `[{"paragraphs": [{"context", "qas": [...]}]}]` as in the JSON files.
        version_2: read `is_impossible` (SQuAD v2.0).
        training: compute answer positions, drop unrecoverable answers.
        skip_bad_rows: skip and count malformed questions instead of raising.
        source: name used in error messages.
    """
    bad = _BadRows(source, skip_bad_rows)
    return _squad_examples(articles, version_2, training, bad), bad.count


def _squad_examples(articles: list, version_2: bool, training: bool,
                    bad: _BadRows) -> list[SquadExample]:
    """google-research/bert's read_squad_examples, with checked inputs."""
    examples = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            doc_tokens, char_to_word_offset = split_context(context)
            for qa in paragraph["qas"]:
                where = f"question {qa.get('id')!r} (article {a}, paragraph {p})"
                if not {"id", "question", "answers"} <= set(qa):
                    bad(where, "question lacks 'id', 'question' or 'answers'")
                    continue
                is_impossible = bool(qa.get("is_impossible", False)) if version_2 else False
                answers = tuple(answer["text"] for answer in qa["answers"])
                start = end = None
                if training and is_impossible:
                    start = end = -1
                elif training:
                    if len(qa["answers"]) != 1:
                        bad(where, f"a training question needs exactly 1 answer, "
                                   f"found {len(qa['answers'])}")
                        continue
                    text, offset = qa["answers"][0]["text"], qa["answers"][0]["answer_start"]
                    if not text or not 0 <= offset <= len(context) - len(text):
                        bad(where, f"answer {text!r} at {offset} lies outside the context "
                                   f"({len(context)} characters)")
                        continue
                    start = char_to_word_offset[offset]
                    end = char_to_word_offset[offset + len(text) - 1]
                    # Only keep answers whose text can be recovered from the doc tokens;
                    # the original drops the rest ("weird Unicode stuff").
                    actual = " ".join(doc_tokens[start:end + 1])
                    if actual.find(" ".join(text.split())) == -1:
                        bad.dropped(where, f"could not find answer {text!r} in {actual!r}")
                        continue
                examples.append(SquadExample(
                    qas_id=qa["id"], question_text=qa["question"], context_text=context,
                    doc_tokens=doc_tokens, char_to_word_offset=char_to_word_offset,
                    answers=answers, is_impossible=is_impossible,
                    start_position=start, end_position=end))
    return examples


# ---------------------------------------------------------------------------------------
# SWAG
# ---------------------------------------------------------------------------------------

_SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")


def _read_swag(path: str, labelled: bool, bad: _BadRows) -> list[SwagExample]:
    """swagaf's CSV: [unnamed row index,] video-id, fold-ind, startphrase, sent1, sent2,
    gold-source, ending0..ending3[, label] (test.csv has no label)."""
    examples = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None) or []
        column = {name: i for i, name in enumerate(header)}
        required = _SWAG_COLUMNS + (("label",) if labelled else ())
        missing = [c for c in required if c not in column]
        if missing:
            raise DataFormatError(path, 1, f"header {header} lacks {missing}; expected "
                                           f"video-id,fold-ind,startphrase,sent1,sent2,"
                                           f"gold-source,ending0..ending3,label")
        for row, lineno, fields in _csv_rows(reader, header, bad):
            label = None
            if labelled:
                raw = fields[column["label"]]
                if raw not in ("0", "1", "2", "3"):
                    bad(lineno, f"label {raw!r} not in ['0', '1', '2', '3']")
                    continue
                label = int(raw)
            guid = fields[column[""]] if "" in column else str(row)
            sent1, sent2, *endings = (fields[column[c]] for c in _SWAG_COLUMNS)
            examples.append(SwagExample(guid, sent1, sent2, tuple(endings), label))
    return examples


# ---------------------------------------------------------------------------------------
# CoNLL-2003
# ---------------------------------------------------------------------------------------

def to_bio(tags: Sequence[str]) -> list[str]:
    """IOB1 -> BIO (IOB2): an I-X that does not continue an X chunk becomes B-X.

    BIO input comes back unchanged, and under conlleval's chunk rules the entities are
    the same before and after.
    """
    out, prev = [], "O"
    for tag in tags:
        if tag.startswith("I-") and prev[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


def _read_conll(path: str, tags: tuple[str, ...], bad: _BadRows) -> list[NerSentence]:
    """`token POS chunk NER` lines, blank line between sentences, -DOCSTART- documents.

    A sentence with a bad line (field count unlike the first token line, or a tag
    outside the task's tags) is dropped whole when skipping; each bad line counts.
    """
    sentences: list[NerSentence] = []
    allowed = set(tags)
    doc_id, num_fields = 0, None
    words: list[str] = []
    sentence_tags: list[str] = []
    sentence_ok, seen_docstart = True, False

    def flush():
        nonlocal words, sentence_tags, sentence_ok
        if words and sentence_ok:
            sentences.append(NerSentence(doc_id, tuple(words), tuple(to_bio(sentence_tags))))
        words, sentence_tags, sentence_ok = [], [], True

    for lineno, line in enumerate(_read_lines(path), start=1):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == "-DOCSTART-":
            flush()
            # Sentences before the first -DOCSTART- (if any) form document 0.
            if seen_docstart or sentences:
                doc_id += 1
            seen_docstart = True
            continue
        if num_fields is None and len(fields) >= 2:
            num_fields = len(fields)  # 4 in CoNLL-2003; checked against the first line
        if len(fields) < 2 or len(fields) != num_fields:
            bad(lineno, f"expected {num_fields or 4} space-separated fields (token POS chunk "
                        f"NER), found {len(fields)}")
            sentence_ok = False
            continue
        if fields[-1] not in allowed:
            bad(lineno, f"tag {fields[-1]!r} not in {sorted(allowed)}")
            sentence_ok = False
            continue
        words.append(fields[0])
        sentence_tags.append(fields[-1])
    flush()
    return sentences
