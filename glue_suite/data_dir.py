"""Where the benchmark data lives: `--data_dir`, else `$BERT_DATA_DIR`, else `./data`.

Entry points pass their `--data_dir` flag (or None) to `resolve_data_dir`; library code
only ever receives the resolved path. `MissingDataError` is the one error every reader
raises for an absent file: it names the file, the layout expected under the data
directory and where the official data is published.
"""

import os
from typing import Optional

ENV_VAR = "BERT_DATA_DIR"
DEFAULT_DATA_DIR = "./data"

# Where each dataset is published, quoted in every missing-file error.
SOURCES = {
    "glue": ("https://gluebenchmark.com/tasks (fetch with the usual download_glue_data.py, "
             "which writes glue_data/<TASK>/{train,dev,test}.tsv)"),
    "mnli": ("https://gluebenchmark.com/tasks (download_glue_data.py writes glue_data/MNLI/); "
             "the MultiNLI 1.0 release with the dev sets is at "
             "https://cims.nyu.edu/~sbowman/multinli/ (multinli_1.0.zip)"),
    "squad": "https://rajpurkar.github.io/SQuAD-explorer/",
    "swag": "https://rowanzellers.com/swag/ (github.com/rowanz/swagaf, data/{train,val,test}.csv)",
    "conll2003": "https://www.clips.uantwerpen.be/conll2003/ner/",
}


class MissingDataError(FileNotFoundError):
    """A benchmark file is absent from the data directory."""


def resolve_data_dir(flag_value: Optional[str] = None) -> str:
    """Returns `flag_value` if given, else `$BERT_DATA_DIR`, else `./data`."""
    return flag_value or os.environ.get(ENV_VAR) or DEFAULT_DATA_DIR


def find_file(data_dir: str, candidates: list[str], *, dataset: str, layout: str) -> str:
    """Returns the first of `candidates` (paths relative to `data_dir`) that exists.

    Args:
        data_dir: the resolved data directory.
        candidates: relative paths in order of preference (official file first).
        dataset: key of `SOURCES`, quoted in the error.
        layout: one line describing the expected layout, quoted in the error.

    Raises:
        MissingDataError: none of the candidates exists.
    """
    for relpath in candidates:
        path = os.path.join(data_dir, relpath)
        if os.path.isfile(path):
            return path
    where = ("" if os.path.isdir(data_dir) else
             f" (the data directory itself does not exist; set --data_dir or ${ENV_VAR})")
    tried = ", ".join(os.path.join(data_dir, c) for c in candidates)
    raise MissingDataError(
        f"missing data file: {tried}{where}. Expected layout under the data directory: "
        f"{layout}. The official data is published at {SOURCES[dataset]}.")
