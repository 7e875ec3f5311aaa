"""extract_features: google-research/bert JSON format, values checked against HF transformers."""

import json

import numpy as np
import pytest

from bert_tf import extract_features
from bert_tf.cli import InputError

LINES = [
    "Amrozi accused his brother , whom he called \" the witness \" , of deliberately distorting "
    "his evidence .",
    "The cat sat on the mat. ||| It was a sunny day in Zürich.",
    "",
    "EU rejects German call to boycott British lamb .",
    "A ||| B",
]


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, minilm_dir):
    directory = tmp_path_factory.mktemp("features")
    (directory / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    extract_features.main(["--checkpoint", minilm_dir, "--input_file", str(directory / "in.txt"),
                           "--output_file", str(directory / "out.jsonl"),
                           "--layers", "-1,-2,0", "--max_seq_length", "24",
                           "--batch_size", "2"])
    with open(directory / "out.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_format_matches_the_original(extracted):
    assert [d["linex_index"] for d in extracted] == list(range(len(LINES)))
    first = extracted[0]["features"][0]
    assert first["token"] == "[CLS]"
    assert [layer["index"] for layer in first["layers"]] == [-1, -2, 0]
    assert len(first["layers"][0]["values"]) == 384
    assert all(round(v, 6) == v for v in first["layers"][0]["values"])
    assert [f["token"] for f in extracted[2]["features"]] == ["[CLS]", "[SEP]"]  # empty line
    assert [f["token"] for f in extracted[4]["features"]] == ["[CLS]", "a", "[SEP]", "b", "[SEP]"]
    assert len(extracted[0]["features"]) == 24  # truncated to max_seq_length, no padding


@pytest.mark.slow
def test_values_match_huggingface(extracted, minilm_dir):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    for line, result in zip(LINES, extracted):
        a, _, b = line.partition(" ||| ")
        encoded = tokenizer(a, b or None, truncation="longest_first", max_length=24,
                            return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded, output_hidden_states=True).hidden_states  # emb + 6 blocks
        tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
        assert [f["token"] for f in result["features"]] == tokens
        for layer_position, index in enumerate([-1, -2, 0]):
            expected = hidden[index if index < 0 else index + 1][0].numpy()
            ours = np.array([f["layers"][layer_position]["values"] for f in result["features"]])
            assert np.abs(ours - expected).max() < 2e-4, (line, index)


def test_bad_layer_is_a_clear_error(tmp_path, minilm_dir, capsys):
    (tmp_path / "in.txt").write_text("hello\n")
    with pytest.raises(SystemExit):
        extract_features.main(["--checkpoint", minilm_dir, "--input_file",
                               str(tmp_path / "in.txt"), "--output_file",
                               str(tmp_path / "out.jsonl"), "--layers", "-1,-9"])
    assert "layer -9 out of range for a 6-layer model" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"in.txt:2: not valid UTF-8"):
        extract_features.read_lines(str(path))
    path.write_bytes(b"a ||| b\r\n\n  spaced  \n")
    assert extract_features.read_lines(str(path)) == [("a", "b"), ("", None), ("spaced", None)]
