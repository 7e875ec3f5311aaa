"""`--source tfds`: the same examples, loaded through tensorflow-datasets (also the
fallback of `glue_suite.run` when there is no data directory: `data_dir.resolve_source`).

tfds downloads and prepares a dataset on first use (network needed), then reads it
from its own data directory; offline, it fails after its download retries (minutes)
with a MissingDataError that names both ways to provide the data. Records map to the
reader's dataclasses so everything downstream is unchanged. What differs from the files:

  - GLUE: guid is tfds's `idx` (the GLUE `index`; the row number for CoLA, SST-2 and
    MRPC, where the files have no index); class names map to the files' label strings.
  - SQuAD: one record per question; the reader's logic (doc tokens, training answer
    positions) is applied to the same context, question and answers.
  - CoNLL-2003: tfds keeps no -DOCSTART- boundaries, so every sentence is its own
    document (no document context); tags are BIO.
  - SWAG is not in tfds (its `hellaswag` is a different dataset).
"""

import logging
from typing import Optional

import numpy as np

from glue_suite.bad_rows import DataFormatError
from glue_suite.data_dir import ENV_VAR, SOURCES, MissingDataError
from glue_suite.readers import (InputExample, NerSentence, expected_layout, is_labelled,
                                to_bio)
from glue_suite.squad_readers import squad_examples
from glue_suite.tasks import REGRESSION, get_task

logger = logging.getLogger(__name__)

# Our split -> tfds split, for the splits other than train, dev ("validation") and test.
_SPLITS = {
    ("mnli", "dev_matched"): "validation_matched",
    ("mnli", "dev_mismatched"): "validation_mismatched",
    ("mnli", "test_matched"): "test_matched",
    ("mnli", "test_mismatched"): "test_mismatched",
    ("mnli", "ax"): "test",
    ("conll2003", "dev"): "dev",
}
# Splits read from another tfds dataset than `TaskSpec.tfds_name`: MNLI's diagnostic
# set AX is a dataset of its own.
_DATASETS = {("mnli", "ax"): "glue/ax"}

# tfds feature names of (text_a, text_b).
_TEXT_FEATURES = {
    "cola": ("sentence", None), "sst2": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"), "stsb": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"), "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"), "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}

# tfds class name -> label string of the GLUE files, where they differ.
_LABEL_NAMES = {
    "cola": {"unacceptable": "0", "acceptable": "1"},
    "sst2": {"negative": "0", "positive": "1"},
    "mrpc": {"not_equivalent": "0", "equivalent": "1"},
    "qqp": {"not_duplicate": "0", "duplicate": "1"},
    "wnli": {"not_entailment": "0", "entailment": "1"},
}


SOURCE_PREFIX = "tfds:"  # how records name what a run read from tfds: tfds:glue/rte[train]


def source_name(task: str, split: str) -> str:
    """How a run's record names the split it read from tfds (its data_files)."""
    return "{}{}[{}]".format(SOURCE_PREFIX, *tfds_split(task, split))


def tfds_split(task: str, split: str) -> tuple[str, str]:
    """(tfds dataset name, tfds split name) of one of our splits."""
    spec = get_task(task)
    if spec.tfds_name is None:
        files = ", ".join(f.path for candidates in spec.files.values() for f in candidates)
        raise ValueError(f"{spec.display_name} is not in tensorflow-datasets; read "
                         f"{files} with --source files")
    if (task, split) in _SPLITS:
        return _DATASETS.get((task, split), spec.tfds_name), _SPLITS[(task, split)]
    if split not in ("train", "dev", "test"):
        raise ValueError(f"task {task} has no split {split!r}")
    return spec.tfds_name, "validation" if split == "dev" else split


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def load_examples(task: str, split: str, data_dir: Optional[str] = None,
                  skip_bad_rows: bool = False, download: bool = True) -> tuple[list, int]:
    """Like `readers.read_examples`, from tensorflow-datasets.

    Args:
        task: a task name (not swag).
        split: one of `readers.splits(task)`.
        data_dir: tfds's data directory (None: its default, ~/tensorflow_datasets).
        skip_bad_rows: skip and count malformed records instead of raising.
        download: download and prepare the dataset if tfds lacks it; False reads only
            what tfds has prepared already (what is not there is a MissingDataError at
            once, not after minutes of offline retries).

    Returns:
        (examples, num_bad_rows).
    """
    import tensorflow_datasets as tfds  # optional dependency, imported on use

    name, tfds_split_name = tfds_split(task, split)
    builder = tfds.builder(name, data_dir=data_dir)
    if download:
        _prepare(builder, task, name)
    dataset = _prepared_split(builder, tfds_split_name, name)
    records = tfds.as_numpy(dataset)
    source = source_name(task, split)
    spec = get_task(task)
    if spec.kind == "span":
        return _squad(records, task, split, source, skip_bad_rows)
    if task == "conll2003":
        return _conll(records, builder.info.features["ner"].names, spec.labels, source,
                      skip_bad_rows)
    return _glue(records, task, split, builder.info.features["label"], source, skip_bad_rows)


def _prepare(builder, task: str, name: str) -> None:
    """Downloads and prepares the dataset unless tfds has it already; a failure (offline:
    after tfds's retries) becomes a MissingDataError naming both ways to the data."""
    try:
        builder.download_and_prepare()
    except Exception as e:  # offline, tfds raises whatever its downloader met
        spec = get_task(task)
        raise MissingDataError(
            f"{SOURCE_PREFIX}{name}", f"tensorflow-datasets could not download and prepare "
            f"it ({type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}). "
            f"Provide the data either way: files in the standard layout under a data "
            f"directory given by --data_dir or ${ENV_VAR} ({expected_layout(task)}; "
            f"published at {SOURCES[spec.source]}); or tensorflow-datasets' own copy, "
            f"prepared once on a machine with a network (`tfds build {name}`, then copy "
            f"~/tensorflow_datasets here or pass --tfds_data_dir).") from e


def _prepared_split(builder, split: str, name: str):
    try:
        return builder.as_dataset(split=split)
    except AssertionError as e:  # tfds's "could not find data in <its data directory>"
        raise MissingDataError(
            f"{SOURCE_PREFIX}{name}", "tensorflow-datasets has not prepared it in its data "
            "directory (--tfds_data_dir, else ~/tensorflow_datasets), and this reader does "
            "not download") from e


def _glue(records, task, split, label_feature, source, skip_bad_rows):
    spec = get_task(task)
    text_a, text_b = _TEXT_FEATURES[task]
    renamed = _LABEL_NAMES.get(task, {})
    labelled = is_labelled(task, split)
    examples, num_bad = [], 0
    for record in records:
        label = None
        if labelled and spec.kind == REGRESSION:
            label = float(record["label"])
        elif labelled:
            class_id = int(record["label"])
            if not 0 <= class_id < label_feature.num_classes:
                if not skip_bad_rows:
                    raise DataFormatError(source, f"idx {int(record['idx'])}",
                                          f"label id {class_id} outside the task's classes")
                num_bad += 1
                continue
            name = label_feature.int2str(class_id)
            label = renamed.get(name, name)
        examples.append(InputExample(
            guid=str(int(record["idx"])), text_a=_text(record[text_a]),
            text_b=_text(record[text_b]) if text_b else None, label=label))
    return examples, num_bad


def _squad(records, task, split, source, skip_bad_rows):
    """Regroups tfds's one-record-per-question into SQuAD articles for the reader."""
    paragraphs = {}  # context -> paragraph dict, in first-seen order
    for record in records:
        context = _text(record["context"])
        answers = [{"text": _text(t), "answer_start": int(s)}
                   for t, s in zip(record["answers"]["text"], record["answers"]["answer_start"])]
        qa = {"id": _text(record["id"]), "question": _text(record["question"]),
              "answers": answers}
        if "is_impossible" in record:
            qa["is_impossible"] = bool(record["is_impossible"])
        paragraphs.setdefault(context, {"context": context, "qas": []})["qas"].append(qa)
    articles = [{"paragraphs": list(paragraphs.values())}]
    return squad_examples(articles, version_2=(task == "squad2.0"), training=(split == "train"),
                          skip_bad_rows=skip_bad_rows, source=source)


def _conll(records, tfds_tag_names, task_tags, source, skip_bad_rows):
    logger.warning("%s has no document boundaries: each sentence is its own document", source)
    examples, num_bad = [], 0
    for i, record in enumerate(records):
        words = [_text(w) for w in record["tokens"]]
        tags = [tfds_tag_names[int(t)] for t in np.asarray(record["ner"])]
        problem = (f"{len(words)} tokens but {len(tags)} tags" if len(words) != len(tags)
                   else None if set(tags) <= set(task_tags) else f"tags {sorted(set(tags))}")
        if problem:
            if not skip_bad_rows:
                raise DataFormatError(source, f"sentence {i}", problem)
            num_bad += 1
            continue
        examples.append(NerSentence(doc_id=i, words=tuple(words), tags=tuple(to_bio(tags))))
    return examples, num_bad
