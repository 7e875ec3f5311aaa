"""Raw benchmark files -> examples: the first stage of every fine-tuning run.

`read_examples(task, split, data_dir)` finds the file of a split under the data directory
(the first of `TaskSpec.files[split]` that exists, official first), reads it in its
format, checks every row and returns `(examples, num_bad_rows)`:

    GLUE TSV (download_glue_data.py)       -> InputExample   (MNLI dev: or MultiNLI 1.0 CSV)
    SQuAD JSON, plain or .gz               -> SquadExample   (in `glue_suite.squad_readers`)
    SWAG CSV (swagaf)                      -> SwagExample
    CoNLL-2003, IOB1 or BIO                -> NerSentence    (tags converted to BIO)

A missing file raises `MissingDataError`; a malformed row raises `DataFormatError` naming
file and line, unless `skip_bad_rows=True`, which skips and counts it.
"""

import csv
import dataclasses
import logging
import os
from typing import Optional, Sequence, Union

import numpy as np

from glue_suite.bad_rows import BadRows, DataFormatError, not_utf8
from glue_suite.data_dir import MissingDataError, find_file
# load_squad_json and squad_examples are imported from here by modules of other owners
# (glue_suite.evaluate, tests/test_squad_postprocess.py) until they import squad_readers.
from glue_suite.squad_readers import (SquadExample, load_squad_json,  # noqa: F401
                                      read_squad_file, squad_examples)
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


# ---------------------------------------------------------------------------------------
# The layout: task -> split -> candidate files (TaskSpec.files)
# ---------------------------------------------------------------------------------------

def splits(task: str) -> tuple[str, ...]:
    """The split names `read_examples` accepts for `task`."""
    return tuple(get_task(task).files)


def is_labelled(task: str, split: str) -> bool:
    """False for the unlabelled test splits: those of `TaskSpec.files` that are neither
    train nor an `eval_splits` (GLUE's test sets, MNLI's test_matched, test_mismatched
    and ax, SWAG's test). CoNLL-2003 evaluates on its test set, which is labelled.
    Other names count as labelled: `evaluate` reads any dev file as split "dev"."""
    spec = get_task(task)
    return split == "train" or split in spec.eval_splits or split not in spec.files


def data_path(task: str, split: str, data_dir: str) -> str:
    """The file `read_examples(task, split, data_dir)` reads (record it with results).

    Raises:
        MissingDataError: no candidate file exists; the message gives the layout.
    """
    spec = get_task(task)
    files = spec.files
    if split not in files:
        raise ValueError(f"task {task} has no split {split!r}; splits: {', '.join(files)}")
    candidates = files[split]
    path = find_file(data_dir, [f.path for f in candidates], dataset=spec.source,
                     layout=expected_layout(task), tfds_name=spec.tfds_name)
    official = candidates[0].path
    if not path.endswith(official) and not path.endswith(official + ".gz"):
        # e.g. the 20k MNLI train subset or the reconstructed SQuAD train: say so.
        note = next(f.note for f in candidates if path == os.path.join(data_dir, f.path))
        logger.warning("%s %s: %s is absent, reading %s%s", task, split, official, path,
                       f" ({note})" if note else "")
    return path


def expected_layout(task: str) -> str:
    """The task's files under the data directory, one clause per split."""
    return "; ".join(f"{split}: {' or '.join(f.path for f in candidates)}"
                     for split, candidates in get_task(task).files.items())


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
        raise MissingDataError(path, "missing data file")
    bad = BadRows(path, skip_bad_rows)
    labelled = is_labelled(task, split)
    if spec.kind == "span":
        examples = read_squad_file(path, version_2=(task == "squad2.0"),
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

def _read_lines(path: str, bad: Optional[BadRows] = None) -> list[Optional[str]]:
    """Lines split on "\\n" only: str.splitlines() would also split on \\x0b, \\x1c,
    U+2028 ..., which can occur inside a sentence. utf-8-sig drops a leading BOM.

    A line that is not UTF-8 is reported to `bad` and comes back as None (without `bad`:
    DataFormatError).
    """
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines[-1] == "":  # final newline (absent in e.g. CoLA/dev.tsv)
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not_utf8(text) is None:  # the usual case: one scan of the whole file
        return lines
    for i, line in enumerate(lines):
        problem = not_utf8(line)
        if problem and bad is None:
            raise DataFormatError(path, i + 1, problem)
        if problem:
            bad(i + 1, problem)
            lines[i] = None
    return lines


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


def _read_glue_tsv(task: str, path: str, labelled: bool, bad: BadRows) -> list[InputExample]:
    """GLUE TSV as written by download_glue_data.py: tab-separated, no quoting."""
    spec = get_task(task)
    cols = spec.columns
    lines = _read_lines(path, bad)
    if cols.no_header and labelled:
        header, first_row_line = cols.no_header, 1
    else:
        if not lines:
            raise DataFormatError(path, 1, "empty file; expected a header line")
        if lines[0] is None:
            raise DataFormatError(path, 1, "the header line is not valid UTF-8")
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
            continue  # a blank line is not a row (None: not UTF-8, already counted)
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


def _csv_rows(reader, header: list, bad: BadRows):
    """(row number, file line, fields) of a csv.reader's data rows; blank lines are
    skipped, and rows with the wrong field count or bytes that are not UTF-8 reported to
    `bad`. The file must be opened with `_open_csv`."""
    if any(map(not_utf8, header)):
        raise DataFormatError(bad.path, 1, "the header line is not valid UTF-8")
    for row, fields in enumerate(reader):
        if not fields:
            continue
        if len(fields) != len(header):
            bad(reader.line_num, f"expected {len(header)} CSV fields, found {len(fields)}")
            continue
        problem = next(filter(None, map(not_utf8, fields)), None)
        if problem:
            bad(reader.line_num, problem)
            continue
        yield row, reader.line_num, fields


def _open_csv(path: str):
    # surrogateescape: a byte that is not UTF-8 spoils its row only (see `_csv_rows`).
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")


def _read_multinli_csv(path: str, labels: tuple[str, ...], bad: BadRows) -> list[InputExample]:
    """MultiNLI 1.0 dev CSV (pairID, sentence1, sentence2, label), standard CSV quoting.

    Rows with gold label "-" (no annotator majority) are dropped, as GLUE drops them.
    guid numbers the kept rows 0, 1, ..., which is the `index` of GLUE's dev files.
    """
    examples = []
    with _open_csv(path) as f:
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


# ---------------------------------------------------------------------------------------
# SWAG
# ---------------------------------------------------------------------------------------

_SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")


def _read_swag(path: str, labelled: bool, bad: BadRows) -> list[SwagExample]:
    """swagaf's CSV: [unnamed row index,] video-id, fold-ind, startphrase, sent1, sent2,
    gold-source, ending0..ending3[, label] (test.csv has no label)."""
    examples = []
    with _open_csv(path) as f:
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


def _read_conll(path: str, tags: tuple[str, ...], bad: BadRows) -> list[NerSentence]:
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

    for lineno, line in enumerate(_read_lines(path, bad), start=1):
        if line is None:  # not UTF-8: already reported, its sentence dropped
            sentence_ok = False
            continue
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
