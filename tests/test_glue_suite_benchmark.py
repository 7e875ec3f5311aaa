"""glue_suite.benchmark: rotation, the summary and the printed report (fast, a made-up
record), and one real round of both recipes on a tiny Hugging Face checkpoint (slow)."""

import json

import pytest

from bert_tf import timing
from glue_suite import benchmark
from tests.test_run import make_data, write_vocab


def _record(rounds):
    return {"command": "python -m glue_suite.benchmark --rounds 2", "date": "2026-01-01T00:00:00",
            "git": {"commit": "abc123", "dirty": True, "changed_files": ["glue_suite/run.py"],
                    "diff_sha256": "0123456789abcdef"},
            "machine": {"cpu": "Some CPU", "cpu_cores": 2, "memory_gib": 8.0, "gpus": [],
                        "packages": {"tensorflow": "2.20.0"}},
            "checkouts": {"glue_suite@../base": {"commit": "def456", "dirty": False}},
            "recipes": ["glue_suite", "hf_torch"], "rounds": rounds,
            "summary": benchmark.summarize(rounds, ["glue_suite", "hf_torch"])}


def test_rotation_puts_every_recipe_first_in_turn():  # bert_tf.timing.rotated
    recipes = list(benchmark.RECIPES)
    firsts = [timing.rotated(recipes, r)[0] for r in range(3)]
    assert sorted(firsts) == sorted(recipes)
    assert all(sorted(timing.rotated(recipes, r)) == sorted(recipes) for r in range(5))


def test_recipes_flag(tmp_path):
    parse = lambda text: benchmark.build_parser().parse_args(["--recipes", text]).recipes
    assert parse(f"glue_suite,glue_suite@{tmp_path}") == ("glue_suite", f"glue_suite@{tmp_path}")
    assert parse("glue_suite_multiple1,glue_suite_padded") == ("glue_suite_multiple1",
                                                               "glue_suite_padded")
    assert [benchmark.recipe_length_multiple(r) for r in
            ("glue_suite", "glue_suite_padded", "glue_suite_multiple16", "hf_torch")] == \
        [None, 0, 16, None]
    for bad in ("glue_suite,nope", f"glue_suite@{tmp_path}/missing", "hf_torch,hf_torch",
                "glue_suite_multiple0", "glue_suite_multiple", "glue_suite_multiplex"):
        with pytest.raises(SystemExit):
            parse(bad)


def test_summary_and_report():
    timings = {"startup": 5.0, "featurize": 1.0, "trace": 8.0, "train_steps": 20.0}
    hf_timings = lambda train: {"startup": 6.0, "train_steps": train, "total": train + 6.0}
    rounds = [{"glue_suite": {"seconds": 40.0, "metrics": {"accuracy": 80.0}, "timings": timings},
               "hf_torch": {"seconds": 80.0, "metrics": {"accuracy": 79.5},
                            "timings": hf_timings(60.0)}},
              {"glue_suite": {"seconds": 50.0, "metrics": {"accuracy": 80.0}, "timings": timings},
               "hf_torch": {"seconds": 90.0, "metrics": {"accuracy": 79.5},
                            "timings": hf_timings(70.0)}},
              {"glue_suite": {"seconds": 45.0, "metrics": {"accuracy": 80.0}, "timings": timings},
               "hf_torch": {"seconds": 85.0, "metrics": {"accuracy": 79.5},
                            "timings": hf_timings(80.0)}}]
    record = _record(rounds)
    summary = record["summary"]
    assert summary["median_seconds"] == {"glue_suite": 45.0, "hf_torch": 85.0}
    ratio = summary["ratios"]["hf_torch/glue_suite"]
    assert ratio["of_medians"] == pytest.approx(85 / 45, abs=1e-3)
    assert (ratio["min"], ratio["max"]) == (pytest.approx(1.8), pytest.approx(2.0))
    assert summary["timings_median"] == {"glue_suite": timings,
                                         "hf_torch": {"startup": 6.0, "train_steps": 70.0,
                                                      "total": 76.0, "exit": 14.0}}
    text = benchmark.report(record)
    for expected in ("command: python -m glue_suite.benchmark",
                     "commit:  abc123 + uncommitted changes to glue_suite/run.py (diff sha256 "
                     "0123456789ab)", "date:    2026-01-01T00:00:00", "machine: Some CPU x2 cores", "median", "time hf_torch/glue_suite: 1.89x",
                     "range 1.80-2.00", "dev glue_suite: accuracy 80.00",
                     "dev hf_torch: accuracy 79.50", "glue_suite timings (median s): startup 5.0",
                     "hf_torch timings (median s): startup 6.0, train_steps 70.0, total 76.0, "
                     "exit 14.0", "glue_suite@../base: commit def456\n"):
        assert expected in text, expected
    json.dumps(record)  # the --output_file record is plain JSON


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    """A tiny random BERT saved by transformers (config.json + model.safetensors)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    directory = tmp_path_factory.mktemp("hf")
    vocab = write_vocab(directory / "vocab.txt")
    size = len(open(vocab, encoding="utf-8").read().split())
    config = transformers.BertConfig(vocab_size=size, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=64)
    transformers.BertModel(config).save_pretrained(str(directory))
    (directory / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    return str(directory)


@pytest.mark.slow
def test_one_round_end_to_end(hf_checkpoint, tmp_path, capsys):
    data = make_data(tmp_path / "data")
    out = tmp_path / "record.json"
    assert benchmark.main(["--task", "rte", "--checkpoint", hf_checkpoint, "--data_dir", data,
                           "--max_train_examples", "16", "--batch_size", "4",
                           "--max_seq_length", "32", "--rounds", "1",
                           "--output_file", str(out)]) == 0
    text = capsys.readouterr().out
    assert "time hf_torch/glue_suite:" in text and "dev hf_torch: accuracy" in text
    record = json.loads(out.read_text())
    times = record["rounds"][0]
    assert set(times) == {"glue_suite", "hf_torch"}
    # glue_suite's steps exclude the first step's trace: 4 steps of this tiny model can
    # round to 0.00 s; HF's include its first step.
    assert times["glue_suite"]["timings"]["train_steps"] >= 0
    hf = times["hf_torch"]["timings"]
    assert hf["train_steps"] > 0
    assert hf["total"] == pytest.approx(sum(v for k, v in hf.items() if k != "total"), abs=0.05)
    # Its start-up is the worker's age from its start tick (1/100 s), inside the parent's
    # timing of the whole subprocess.
    assert hf["total"] <= times["hf_torch"]["seconds"] + 0.01
    assert record["git"]["commit"] and record["machine"]["cpu_cores"] >= 1
    assert record["command"].startswith("python -m glue_suite.benchmark") and record["date"]
