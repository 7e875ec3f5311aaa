"""bert_tf.portable_paths: the form each kind of path takes in a record, in free text
(commands, logs) and in a whole JSON record; the check that finds a machine's paths."""

import json
import logging
import os
import sysconfig

import pytest

from bert_tf.portable_paths import (_MACHINE_DIRS, ELSEWHERE, PortableFormatter, command_line,
                                    directory_sha256, machine_paths, portable_path,
                                    portable_record, portable_text)


@pytest.fixture
def dirs(tmp_path):
    """(data directory, output directory), both outside the working directory."""
    return str(tmp_path / "data"), str(tmp_path / "out")


def test_each_kind_of_path_takes_its_form(dirs, tmp_path):
    data, out = dirs
    portable = lambda path: portable_path(path, data, out)
    assert portable(f"{data}/glue_data/RTE/dev.tsv") == "$BERT_DATA_DIR/glue_data/RTE/dev.tsv"
    assert portable(data) == "$BERT_DATA_DIR"
    assert portable(f"{data}/squad/") == "$BERT_DATA_DIR/squad/"  # the slash is kept
    assert portable(f"{out}/submission/RTE.tsv") == "submission/RTE.tsv"
    assert portable(out) == "."
    assert portable(os.path.join(os.getcwd(), "runs", "glue_cache")) == "runs/glue_cache"
    assert portable("runs/glue_cache") == "runs/glue_cache"  # relative: to the working dir
    assert portable(str(tmp_path / "other" / "vocab.txt")) == f"{ELSEWHERE}/vocab.txt"
    assert portable("gs://bucket/tmp/run") == "gs://bucket/tmp/run"
    library = sysconfig.get_paths()["purelib"]
    assert portable(f"{library}/numpy/core.py") == f"{os.path.basename(library)}/numpy/core.py"


def test_the_shipped_checkpoint_is_named_by_package_and_content(minilm_dir):
    from bert_tf.checkpoints import DEFAULT_PACKAGE
    name = f"{DEFAULT_PACKAGE}@sha256:{directory_sha256(minilm_dir)[:16]}"
    assert portable_path(minilm_dir) == name
    assert portable_path(os.path.join(minilm_dir, "vocab.txt")) == f"{name}/vocab.txt"


def test_directory_hash_covers_names_and_contents(tmp_path):
    def tree(name, files):
        for path, text in files.items():
            (tmp_path / name / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / path).write_text(text)
        return directory_sha256(str(tmp_path / name))
    same = tree("a", {"vocab.txt": "x", "sub/w": "y"})
    assert tree("b", {"vocab.txt": "x", "sub/w": "y"}) == same
    assert tree("c", {"vocab.txt": "x", "sub/w": "z"}) != same
    assert tree("d", {"vocab.txt": "x", "sub/v": "y"}) != same


def test_text_gets_portable_paths_and_keeps_everything_else(dirs, tmp_path):
    data, out = dirs
    text = (f"python -m m --input_files '{data}/wiki_0[0-8],{data}/gutenberg/*.txt' "
            f"--output_dir={out}/x --cache_dir {tmp_path}/cache; missing data file: "
            f"{data}/MNLI/test.tsv. Expected (see {out}/run.log)")
    assert portable_text(text, data, out) == (
        "python -m m --input_files '$BERT_DATA_DIR/wiki_0[0-8],$BERT_DATA_DIR/gutenberg/*.txt' "
        "--output_dir=x --cache_dir <elsewhere>/cache; missing data file: "
        "$BERT_DATA_DIR/MNLI/test.tsv. Expected (see run.log)")
    kept = ("/dev/null, gs://b/tmp/x, https://gluebenchmark.com/tasks, "
            "/job:localhost/replica:0/task:0/device:CPU:0, 80/10/10, 12 tokens/s, /usr/bin/env")
    assert portable_text(kept, data, out) == kept
    once = portable_text(text, data, out)
    assert portable_text(once, data, out) == once  # idempotent


def test_a_relative_data_directory_is_named_too(dirs):
    data = os.path.relpath(dirs[0])  # e.g. BERT_DATA_DIR=../shared/data
    assert portable_text(f"reading {data}/glue_data/RTE/train.tsv", data) == \
        "reading $BERT_DATA_DIR/glue_data/RTE/train.tsv"
    assert portable_text("no data in data/x", "data") == "no data in data/x"  # too common


def test_a_record_gets_portable_strings_everywhere(dirs):
    data, out = dirs
    record = {"config": {"data_dir": data, "seeds": 3, "rates": (1e-4, 2e-5)},
              "outputs": [f"{out}/dev_predictions.tsv"], "task": "rte", "ok": True}
    assert portable_record(record, data, out) == {
        "config": {"data_dir": "$BERT_DATA_DIR", "seeds": 3, "rates": [1e-4, 2e-5]},
        "outputs": ["dev_predictions.tsv"], "task": "rte", "ok": True}


def test_a_command_line_is_relative_to_the_working_directory(dirs):
    data, out = dirs
    run_dir = os.path.join(os.getcwd(), "runs", "rte")
    assert command_line("glue_suite.run", ["--data_dir", data, "--output_dir", run_dir,
                                           "--task", "rte"], data) == \
        "python -m glue_suite.run --data_dir $BERT_DATA_DIR --output_dir runs/rte --task rte"
    # A script is run by its path, not as a module.
    assert command_line("results/benchmark/fused_adam_ab.py", ["--rounds", "8"]) == \
        "python results/benchmark/fused_adam_ab.py --rounds 8"


def test_a_log_file_gets_portable_paths(dirs):
    data, out = dirs
    formatter = PortableFormatter("%(levelname)s %(message)s", data, out)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "read %s, wrote %s",
                               (f"{data}/RTE/dev.tsv", f"{out}/metrics.json"), None)
    assert formatter.format(record) == \
        "INFO read $BERT_DATA_DIR/RTE/dev.tsv, wrote metrics.json"


def test_machine_paths_finds_a_machines_paths_and_nothing_else():
    # A path under each machine directory, composed so that this file holds none itself;
    # one behind a JSON-escaped newline.
    paths = [f"/{d}/x/y" for d in _MACHINE_DIRS]
    text = " ".join([json.dumps({"a": paths[0], "b": "log line\n" + paths[1]}), *paths[2:],
                     "gs://b/tmp/x /dev/null $BERT_DATA_DIR/x <elsewhere>/x runs/x"])
    assert machine_paths(text) == paths
    assert machine_paths(f"cwd {os.getcwd()}/bert_tf") == [f"{os.getcwd()}/bert_tf"]
    # A checkout named in a recipe (glue_suite.benchmark's glue_suite@DIR).
    assert machine_paths(f"--recipes glue_suite,glue_suite@{paths[0]}") == [paths[0]]
