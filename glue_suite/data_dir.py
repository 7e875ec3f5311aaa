"""Where the benchmark data lives: `--data_dir`, else `$BERT_DATA_DIR`, else `./data`;
or tensorflow-datasets.

Entry points pass their `--data_dir` flag (or None) to `resolve_data_dir`; library code
only ever receives the resolved path. `MissingDataError` is the one error every reader
raises for an absent file: it names the file, the layout expected under the data
directory, where the official data is published, and the tfds alternative.

Data without set-up (`resolve_source`): when no --data_dir is given and the default
directory does not exist, a task that tensorflow-datasets has (`TaskSpec.tfds_name`:
GLUE, SQuAD, CoNLL-2003) is read from tfds, which downloads it on first use; so on a
machine with a network `python -m glue_suite.run --task rte` needs nothing by hand. The
harness plans its fine-tuning runs the same way (`no_data_directory`).
"""

import os
from typing import Optional

from bert_tf.cli import MissingInputError
from bert_tf.portable_paths import DATA_DIR_VAR as ENV_VAR  # its name in records too

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


class MissingDataError(MissingInputError):
    """A benchmark file is absent: `MissingDataError(path, message)`, printed
    `path: message` (and a FileNotFoundError)."""


def resolve_data_dir(flag_value: Optional[str] = None) -> str:
    """Returns `flag_value` if given, else `$BERT_DATA_DIR`, else `./data`."""
    return flag_value or os.environ.get(ENV_VAR) or DEFAULT_DATA_DIR


def resolve_source(data_dir_flag: Optional[str], source_flag: Optional[str],
                   tfds_name: Optional[str]) -> tuple[str, str]:
    """(data directory, "files" or "tfds") of a run.

    Args:
        data_dir_flag: --data_dir, or None.
        source_flag: --source, or None: "tfds" if no --data_dir was given, the default
            directory does not exist and tfds has the task (`tfds_name`); else "files".
    """
    data_dir = resolve_data_dir(data_dir_flag)
    if source_flag:
        return data_dir, source_flag
    if tfds_name is None or not no_data_directory(data_dir_flag):
        return data_dir, "files"
    return data_dir, "tfds"


def no_data_directory(data_dir_flag: Optional[str]) -> bool:
    """Whether nothing is set up: no --data_dir given and no directory at the default
    ($BERT_DATA_DIR, else ./data). Then tasks that tfds has are read from it, by
    `glue_suite.run` (`resolve_source`) and by the harness (`reproduce.all`) alike. A
    --data_dir that was given is never replaced: its absence is the user's error."""
    return not data_dir_flag and not os.path.isdir(resolve_data_dir(None))


def set_up_data_dir(data_dir_flag: Optional[str]) -> Optional[str]:
    """The data directory where there is one (`resolve_data_dir`), None where nothing is
    set up (`no_data_directory`): what the tables read gold labels from."""
    return None if no_data_directory(data_dir_flag) else resolve_data_dir(data_dir_flag)


def tfds_hint(tfds_name: str) -> str:
    """The other way to provide a task's data, quoted in every missing-data error."""
    return (f"Or let tensorflow-datasets provide it ({tfds_name}): pass --source tfds, or "
            f"give no data directory (none at --data_dir, ${ENV_VAR} or {DEFAULT_DATA_DIR}); "
            f"it downloads on first use (network needed; offline, `tfds build {tfds_name}` "
            f"on a machine with one and copy ~/tensorflow_datasets, or pass --tfds_data_dir).")


def find_file(data_dir: str, candidates: list[str], *, dataset: str, layout: str,
              tfds_name: Optional[str] = None) -> str:
    """Returns the first of `candidates` (paths relative to `data_dir`) that exists.

    Args:
        data_dir: the resolved data directory.
        candidates: relative paths in order of preference (official file first).
        dataset: key of `SOURCES`, quoted in the error.
        layout: one line describing the expected layout, quoted in the error.
        tfds_name: the task's tensorflow-datasets name, if it has one (`tfds_hint`).

    Raises:
        MissingDataError: none of the candidates exists.
    """
    for relpath in candidates:
        path = os.path.join(data_dir, relpath)
        if os.path.isfile(path):
            return path
    where = ("" if os.path.isdir(data_dir) else
             f" (the data directory itself does not exist; set --data_dir or ${ENV_VAR})")
    others = [os.path.join(data_dir, c) for c in candidates[1:]]
    also = f" (nor {', '.join(others)})" if others else ""
    raise MissingDataError(
        os.path.join(data_dir, candidates[0]),
        f"missing data file{also}{where}. Expected layout under the data directory: "
        f"{layout}. The official data is published at {SOURCES[dataset]}."
        + (f" {tfds_hint(tfds_name)}" if tfds_name else ""))
