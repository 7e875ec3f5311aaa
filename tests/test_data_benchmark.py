"""bert_tf.data_benchmark: both tools run on the same corpus and the report says so."""

import json

from test_create_pretraining_data import VOCAB, write_corpus

from bert_tf import data_benchmark
from bert_tf.portable_paths import machine_paths


def test_both_tools_make_instances_of_one_corpus_and_ours_reruns_it_repeated(tmp_path):
    write_corpus(tmp_path / "text", num_files=2, docs_per_file=6, sentences_per_doc=20)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    record_file = tmp_path / "record.json"
    data_benchmark.main(["--input_files", str(tmp_path / "text" / "*.txt"),
                         "--vocab_file", str(vocab), "--max_seq_length", "64",
                         "--max_predictions_per_seq", "10", "--dupe_factor", "2",
                         "--rounds", "1", "--memory_repeats", "2",
                         "--work_dir", str(tmp_path / "work"),
                         "--output_file", str(record_file)])
    record = json.loads(record_file.read_text())
    assert not machine_paths(record_file.read_text())
    # The corpus the tools read is the input's text: one line per sentence, same documents.
    assert record["corpus"]["documents"] == 12 and record["corpus"]["sentences"] == 240
    ours, tfm = (record["summary"]["instances"][t] for t in ("bert_tf", "tfm"))
    # Same documents, settings and length: the same number of instances within the
    # randomness of short targets and random next sentences.
    assert ours > 0 and tfm > 0 and abs(ours - tfm) < 0.25 * tfm
    for results in record["rounds"]:
        for tool in ("bert_tf", "tfm"):
            result = results[tool]
            assert result["instances"] == record["summary"]["instances"][tool]
            assert result["instances_per_second"] == round(result["instances"]
                                                           / result["seconds"], 1)
            assert result["peak_rss_mb"] > 100  # TensorFlow alone takes more
    ratio = record["summary"]["ratio"]
    assert ratio["low"] <= ratio["of_medians"] <= ratio["high"]
    # The input is already in the lines format, so ours reads the same text again, twice.
    [twice] = record["memory"]
    assert twice["input_files"] == 4 and 1.8 * ours <= twice["instances"] <= 2.2 * ours
