"""Every command line on bad input: one line `error: FILE[:LINE]: ...`, exit 2, no traceback,
nothing half-written (issue #13).

Each case sets up one bad input beside good ones (a tiny checkpoint, tiny records, a tiny
RTE directory, all made once per module) and runs the command's `__main__` block in this
process (`runpy`, so the `run_main(main)` line itself is exercised), then checks:
  - the exit code is 2 and stderr has one `error:` line naming the file (and line);
  - "Traceback" is not in stderr;
  - no temporary file is left (`*.tmp*`) and no new metrics.json / metadata.json /
    pretrain_config.json.
A few cases also run as real `python -m` processes (TensorFlow's start-up costs ~5-8 s each).
"""

import collections
import glob
import json
import os
import runpy
import shutil
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

from bert_tf import checkpoints
from bert_tf import create_pretraining_data as cpd
from bert_tf.config import BertConfig
from bert_tf.portable_paths import portable_path
from bert_tf.pretraining_dataset import instance_to_example
from bert_tf.pretraining_instances import DataConfig, Instance

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "a", "big", "red", "."]
T, P = 32, 5  # the records' shape
POSITIONS = 64  # the checkpoint's max_position_embeddings
FORBIDDEN = ("metrics.json", "metadata.json", "pretrain_config.json")


# ---------------------------------------------------------------------------------------
# The good inputs, made once

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n")
    cased = root / "vocab_cased.txt"  # another vocabulary, as uncased vs cased
    cased.write_text("\n".join(SPECIALS + [w.capitalize() for w in WORDS] + ["extra"]) + "\n")

    config = BertConfig(vocab_size=len(SPECIALS) + len(WORDS), hidden_size=8,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        max_position_embeddings=POSITIONS)
    root_layers = checkpoints.build_model(config)
    checkpoints.write_checkpoint(str(root / "ckpt"), config,
                                 checkpoints.collect_weights(root_layers), str(vocab), True)

    rng = np.random.default_rng(0)
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(
        "\n".join(" ".join(rng.choice(WORDS[:-1], 6)) + " ." for _ in range(8))
        for _ in range(12)) + "\n")
    metadata = cpd.create_pretraining_data(
        [str(corpus)], str(vocab), str(root / "records"),
        DataConfig(max_seq_length=T, max_predictions_per_seq=P, dupe_factor=2),
        shard_size=20, progress=False)
    assert len(metadata["shards"]) >= 3

    glue = root / "data" / "glue_data" / "RTE"
    glue.mkdir(parents=True)
    rows = "".join(f"{i}\tthe cat sat\tthe dog ran\t{'entailment' if i % 2 else 'not_entailment'}\n"
                   for i in range(4))
    (glue / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + rows)
    (glue / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + rows)

    squad = root / "dev-v2.0.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": "the cat sat on the mat .", "qas": [
            {"id": "q1", "question": "who sat ?", "is_impossible": False,
             "answers": [{"text": "the cat", "answer_start": 0}]}]}]}]}))
    return types.SimpleNamespace(root=root, vocab=str(vocab), cased=str(cased),
                                 ckpt=str(root / "ckpt"), records=str(root / "records"),
                                 corpus=str(corpus), data=str(root / "data"),
                                 glue=glue, squad=str(squad))


# ---------------------------------------------------------------------------------------
# Bad inputs: each setup returns (module, argv, what the error line must contain)

def _copy(source, tmp, name):
    return shutil.copytree(source, tmp / name)


def _truncate(path, keep=0.5):
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:int(len(data) * keep)])


def _read_only(tmp, monkeypatch):
    """A directory this process cannot write: chmod, and os.access says so even for root
    (which chmod does not stop)."""
    path = tmp / "read_only"
    path.mkdir()
    path.chmod(0o555)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.path.abspath(p) == str(
        path) else real(p, mode, **kw))
    return path


def _a_file(tmp):
    path = tmp / "a_file"
    path.write_text("not a directory\n")
    return path


def _cpd(w, out):
    return ["--input_files", w.corpus, "--vocab_file", w.vocab, "--output_dir", str(out),
            "--max_seq_length", str(T), "--max_predictions_per_seq", str(P)]


def cpd_output_dir_is_a_file(w, tmp, mp):
    out = _a_file(tmp)
    return "bert_tf.create_pretraining_data", _cpd(w, out), f"{out}: is a file"


def cpd_output_dir_read_only(w, tmp, mp):
    out = _read_only(tmp, mp)
    return "bert_tf.create_pretraining_data", _cpd(w, out), f"{out}: directory is not writable"


def _pretrain(w, train_files, *extra, vocab=None):
    return ["--config", "tiny", "--train_files", train_files, "--vocab_file", vocab or w.vocab,
            "--model_dir", str(w.model_dir), "--max_seq_length", str(T),
            "--max_predictions_per_seq", str(P), "--num_train_steps", "2",
            "--num_warmup_steps", "0", "--global_batch_size", "4", *extra]


def pretrain_shards_without_metadata(w, tmp, mp):
    records = _copy(w.records, tmp, "records")
    os.remove(records / "metadata.json")  # as a killed create_pretraining_data leaves them
    return ("bert_tf.pretrain", _pretrain(w, f"{records}/part-*"),
            f"{records}/metadata.json: missing beside")


def pretrain_shard_missing(w, tmp, mp):
    records = _copy(w.records, tmp, "records")
    shards = sorted(records.glob("part-*"))
    os.remove(shards[1])
    return ("bert_tf.pretrain", _pretrain(w, f"{records}/part-*"),
            f"{records}/metadata.json: lists {len(shards)} shards, {len(shards) - 1} of them")


def pretrain_other_vocabulary(w, tmp, mp):
    # (the records' vocabulary as their metadata.json names it: bert_tf.portable_paths)
    return ("bert_tf.pretrain", _pretrain(w, f"{w.records}/part-*", vocab=w.cased),
            f"{w.records}/metadata.json: records hold max_seq_length {T}, "
            f"max_predictions_per_seq {P}, vocab {portable_path(str(w.vocab))} (sha256 ")


def pretrain_other_predictions(w, tmp, mp):
    argv = _pretrain(w, f"{w.records}/part-*")
    argv[argv.index("--max_predictions_per_seq") + 1] = "30"
    return ("bert_tf.pretrain", argv, f"{w.records}/metadata.json: records hold max_seq_length "
            f"{T}, max_predictions_per_seq {P}, vocab {portable_path(str(w.vocab))}")


def pretrain_phase2_records(w, tmp, mp):
    argv = _pretrain(w, f"{w.records}/part-*", "--phase2_train_files", f"{w.records}/part-*",
                     "--phase2_seq_length", "64", "--phase2_max_predictions_per_seq", str(P))
    return ("bert_tf.pretrain", argv,
            "pretrain was given max_seq_length 64 for --phase2_train_files")


def pretrain_eval_records_without_metadata(w, tmp, mp):
    path = tmp / "heldout.tfrecord"  # named as the original tools would: no metadata.json
    import tensorflow as tf
    with tf.io.TFRecordWriter(str(path)) as writer:
        instance = Instance([2, 5, 4, 3], [0, 0, 0, 0], [2], [6], 0)
        writer.write(instance_to_example(instance, 16, P).SerializeToString())
    argv = _pretrain(w, f"{w.records}/part-*", "--eval_files", str(path))
    return "bert_tf.pretrain", argv, f"{path}: records hold max_seq_length 16"


def pretrain_truncated_shard(w, tmp, mp):
    records = _copy(w.records, tmp, "records")
    shard = sorted(records.glob("part-*"))[0]
    _truncate(shard)
    return ("bert_tf.pretrain", _pretrain(w, f"{records}/part-*"),
            f"{shard}: {os.path.getsize(shard)} bytes, but metadata.json says")


def pretrain_truncated_foreign_records(w, tmp, mp):
    path = tmp / "tf_examples.tfrecord"  # named as the original tools would
    shutil.copy(sorted(glob.glob(f"{w.records}/part-*"))[0], path)
    _truncate(path, 0.7)
    return ("bert_tf.pretrain", _pretrain(w, str(path)),
            f"{path}: truncated: the record at byte")


def pretrain_glob_matches_nothing(w, tmp, mp):
    return ("bert_tf.pretrain", _pretrain(w, f"{tmp}/nothing-*"),
            f"{tmp}/nothing-*: --train_files matches no file")


def pretrain_model_dir_is_a_file(w, tmp, mp):
    w.model_dir = _a_file(tmp)
    return ("bert_tf.pretrain", _pretrain(w, f"{w.records}/part-*"),
            f"{w.model_dir}: is a file")


def _run(w, *extra, ckpt=None, data=None, output_dir=None):
    return ["--task", "rte", "--init_checkpoint", str(ckpt or w.ckpt),
            "--data_dir", str(data or w.data),
            "--output_dir", str(output_dir or w.tmp / "run"), "--no_test_predictions",
            "--max_seq_length", "16", "--epochs", "1", "--batch_size", "2", *extra]


def _data_with_train(w, tmp, content: bytes):
    data = _copy(w.data, tmp, "data")
    train = data / "glue_data" / "RTE" / "train.tsv"
    train.write_bytes(content)
    return data, train


def run_tsv_not_utf8(w, tmp, mp):
    data, train = _data_with_train(w, tmp, b"index\tsentence1\tsentence2\tlabel\n"
                                   b"0\ta\tb\tentailment\n1\tcaf\xe9\tb\tentailment\n")
    return "glue_suite.run", _run(w, data=data), f"{train}:3: not valid UTF-8: byte 0xe9"


def run_tsv_header_not_utf8_skip_bad_rows(w, tmp, mp):
    data, train = _data_with_train(w, tmp, b"index\tsentence1\tsent\xff2\tlabel\n"
                                   b"0\ta\tb\tentailment\n")
    return ("glue_suite.run", _run(w, "--skip_bad_rows", data=data),
            f"{train}:1: the header line is not valid UTF-8")


def run_header_only_train_file(w, tmp, mp):
    data, train = _data_with_train(w, tmp, b"index\tsentence1\tsentence2\tlabel\n")
    return "glue_suite.run", _run(w, data=data), f"{train}: no examples; the train split"


def run_truncated_weights(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "ckpt")
    _truncate(ckpt / "weights.safetensors")
    return ("glue_suite.run", _run(w, ckpt=str(ckpt)),
            f"{ckpt}/weights.safetensors: not a readable safetensors file")


def run_truncated_hf_weights(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "hf")
    os.rename(ckpt / "weights.safetensors", ckpt / "model.safetensors")  # HF's layout
    _truncate(ckpt / "model.safetensors", 0.01)
    return ("glue_suite.run", _run(w, ckpt=str(ckpt)),
            f"{ckpt}/model.safetensors: not a readable safetensors file")


def run_truncated_config(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "ckpt")
    _truncate(ckpt / "config.json", 0.6)
    return "glue_suite.run", _run(w, ckpt=str(ckpt)), f"{ckpt}/config.json:"


def run_max_seq_length_over_positions(w, tmp, mp):
    argv = _run(w)
    argv[argv.index("--max_seq_length") + 1] = "10000"
    return ("glue_suite.run", argv, f"{w.ckpt}/config.json: max_position_embeddings is "
            f"{POSITIONS}; --max_seq_length 10000 needs")


def run_output_dir_is_a_file(w, tmp, mp):
    out = _a_file(tmp)
    return "glue_suite.run", _run(w, output_dir=out), f"{out}: is a file"


def run_output_dir_read_only(w, tmp, mp):
    out = _read_only(tmp, mp)
    return ("glue_suite.run", _run(w, output_dir=out / "run"),
            f"{out}: directory is not writable")


def run_output_dir_holds_a_finished_run(w, tmp, mp):
    out = tmp / "finished"
    out.mkdir()
    (out / "metrics.json").write_text('{"task": "rte", "outputs": []}\n')
    return ("glue_suite.run", _run(w, output_dir=out),
            f"{out}/metrics.json: holds a finished run (rte); pass --overwrite")


def _squad(w, predictions, *extra):
    return ["--task", "squad2.0", "--data_file", w.squad, "--predictions", str(predictions),
            *extra]


def evaluate_answer_is_a_number(w, tmp, mp):
    preds = tmp / "predictions.json"
    preds.write_text('{"q1": 3}')
    return ("glue_suite.evaluate", _squad(w, preds),
            f"{preds}: question 'q1': 3 is not an answer string")


def evaluate_na_probs_are_strings(w, tmp, mp):
    preds, probs = tmp / "predictions.json", tmp / "null_odds.json"
    preds.write_text('{"q1": "the cat"}')
    probs.write_text('{"q1": "0.5"}')
    return ("glue_suite.evaluate", _squad(w, preds, "--na_prob_file", str(probs)),
            f"{probs}: question 'q1': \"0.5\" is not a number")


def evaluate_predictions_are_a_list(w, tmp, mp):
    preds = tmp / "predictions.json"
    preds.write_text('["the cat"]')
    return ("glue_suite.evaluate", _squad(w, preds),
            f"{preds}:1: a JSON list; expected an object")


def evaluate_truncated_predictions(w, tmp, mp):
    preds = tmp / "predictions.json"
    preds.write_text('{"q1": "the c')
    return "glue_suite.evaluate", _squad(w, preds), f"{preds}:1: not valid JSON"


def evaluate_tsv_not_utf8(w, tmp, mp):
    preds = tmp / "preds.tsv"
    preds.write_bytes(b"index\tprediction\n0\tentailm\xe9nt\n")
    dev = w.glue / "dev.tsv"
    return ("glue_suite.evaluate", ["--task", "rte", "--data_file", str(dev),
                                    "--predictions", str(preds)],
            f"{preds}:2: not valid UTF-8: byte 0xe9")


def extract_features_truncated_config(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "ckpt")
    _truncate(ckpt / "config.json", 0.6)
    (tmp / "in.txt").write_text("the cat\n")
    return ("bert_tf.extract_features", ["--checkpoint", str(ckpt), "--input_file",
                                         str(tmp / "in.txt"), "--output_file",
                                         str(tmp / "out.jsonl")], f"{ckpt}/config.json:")


def extract_features_output_under_a_file(w, tmp, mp):
    parent = _a_file(tmp)
    (tmp / "in.txt").write_text("the cat\n")
    return ("bert_tf.extract_features", ["--checkpoint", w.ckpt, "--input_file",
                                         str(tmp / "in.txt"), "--output_file",
                                         str(parent / "out.jsonl")],
            f"{parent}: is a file; --output_file {parent / 'out.jsonl'} needs a directory")


def extract_features_max_seq_length_over_positions(w, tmp, mp):
    (tmp / "in.txt").write_text("the cat\n")
    return ("bert_tf.extract_features", ["--checkpoint", w.ckpt, "--input_file",
                                         str(tmp / "in.txt"), "--output_file",
                                         str(tmp / "out.jsonl"), "--max_seq_length", "10000"],
            f"{w.ckpt}/config.json: max_position_embeddings is {POSITIONS}")


def export_output_dir_is_a_file(w, tmp, mp):
    out = _a_file(tmp)
    return ("bert_tf.export", ["--checkpoint", w.ckpt, "--output_dir", str(out)],
            f"{out}: is a file")


def export_truncated_weights(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "ckpt")
    _truncate(ckpt / "weights.safetensors")
    return ("bert_tf.export", ["--checkpoint", str(ckpt), "--output_dir", str(tmp / "out")],
            f"{ckpt}/weights.safetensors: not a readable safetensors file")


def convert_truncated_weights(w, tmp, mp):
    ckpt = _copy(w.ckpt, tmp, "ckpt")
    _truncate(ckpt / "weights.safetensors")
    return ("bert_tf.convert", ["--checkpoint", str(ckpt), "--to", "hf", "--output_dir",
                                str(tmp / "out")],
            f"{ckpt}/weights.safetensors: not a readable safetensors file")


def convert_output_dir_read_only(w, tmp, mp):
    out = _read_only(tmp, mp)
    return ("bert_tf.convert", ["--checkpoint", w.ckpt, "--to", "hf", "--output_dir",
                                str(out / "hf")], f"{out}: directory is not writable")


CASES = [cpd_output_dir_is_a_file, cpd_output_dir_read_only,
         pretrain_shards_without_metadata, pretrain_shard_missing, pretrain_other_vocabulary,
         pretrain_other_predictions, pretrain_phase2_records,
         pretrain_eval_records_without_metadata, pretrain_truncated_shard,
         pretrain_truncated_foreign_records, pretrain_glob_matches_nothing,
         pretrain_model_dir_is_a_file,
         run_tsv_not_utf8, run_tsv_header_not_utf8_skip_bad_rows, run_header_only_train_file,
         run_truncated_weights, run_truncated_hf_weights, run_truncated_config,
         run_max_seq_length_over_positions, run_output_dir_is_a_file, run_output_dir_read_only,
         run_output_dir_holds_a_finished_run,
         evaluate_answer_is_a_number, evaluate_na_probs_are_strings,
         evaluate_predictions_are_a_list, evaluate_truncated_predictions, evaluate_tsv_not_utf8,
         extract_features_truncated_config, extract_features_output_under_a_file,
         extract_features_max_seq_length_over_positions,
         export_output_dir_is_a_file, export_truncated_weights,
         convert_truncated_weights, convert_output_dir_read_only]
# Also run as real processes: one per kind of entry point (TF-free, and with TensorFlow).
SUBPROCESS = {"evaluate_answer_is_a_number", "convert_truncated_weights",
              "pretrain_glob_matches_nothing", "run_header_only_train_file"}


# ---------------------------------------------------------------------------------------
# The checks

def _paths(root):
    return {os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files}


def _check(code, err, needle, roots, before):
    error_lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2, err[-2000:]
    assert len(error_lines) == 1 and needle in error_lines[0], err[-2000:]
    assert "Traceback" not in err
    new = set().union(*map(_paths, roots)) - before
    leftovers = [p for p in new if ".tmp" in os.path.basename(p)
                 or os.path.basename(p) in FORBIDDEN]
    assert not leftovers, leftovers


@pytest.fixture
def case_world(world, tmp_path):
    """The module's world, with this case's tmp_path and model_dir."""
    return types.SimpleNamespace(**{**vars(world), "tmp": tmp_path,
                                    "model_dir": tmp_path / "model"})


@pytest.mark.parametrize("setup", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_is_one_error_line(setup, case_world, tmp_path, monkeypatch, capsys):
    module, argv, needle = setup(case_world, tmp_path, monkeypatch)
    before = _paths(case_world.root) | _paths(tmp_path)
    monkeypatch.setattr(sys, "argv", [module, *argv])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: "found in sys.modules"
        with pytest.raises(SystemExit) as exit_:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    roots = (case_world.root, tmp_path)
    _check(exit_.value.code, capsys.readouterr().err, needle, roots, before)
    if setup.__name__ in SUBPROCESS:
        process = subprocess.run([sys.executable, "-m", module, *argv], cwd=REPO,
                                 capture_output=True, text=True, timeout=180)
        _check(process.returncode, process.stderr, needle, roots, before)


def test_truncated_featurization_cache_is_rebuilt(world, tmp_path, caplog):
    from bert_tf.tokenization import BertTokenizer
    from glue_suite import features, readers
    examples, _ = readers.read_file("rte", "train", str(world.glue / "train.tsv"))
    tokenizer = BertTokenizer(world.vocab)
    settings = features.FeatureSettings(max_seq_length=16)

    def load():
        return features.load_or_convert("rte", "train", examples, tokenizer, "sha", settings,
                                        labelled=True, training=True, cache_dir=str(tmp_path))
    first, stats = load()
    _truncate(stats["cache_file"])
    again, stats = load()
    assert not stats["cached"] and "unreadable featurization cache" in caplog.text
    assert stats["cache_file"] in caplog.text
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert load()[1]["cached"]  # rewritten whole
    assert collections.Counter(".tmp" in p for p in os.listdir(tmp_path))[True] == 0
