"""Tests of bert_tf.create_pretraining_data, through the records it writes (read back
with bert_tf.pretraining_dataset).

The synthetic corpus makes every token tell where it came from: sentence s of document
d is "dDsS dDsS ... ." (the token `dDsS` repeated), so an instance can be traced back to
its documents and sentences once its masks are undone.
"""

import collections
import glob
import json
import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import create_pretraining_data as cpd
from bert_tf import shard_set
from bert_tf.cli import InputError, run_main
from bert_tf.files import file_sha256
from bert_tf.portable_paths import portable_path
from bert_tf.pretraining_dataset import (check_records, decode_record, feature_spec,
                                         make_pretraining_dataset, records_are_unmasked)
from bert_tf.pretraining_instances import DataConfig

NUM_DOCS, NUM_SENTENCES = 200, 40
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
STEMS, SUFFIXES = [f"w{i}" for i in range(40)], [f"##x{j}" for j in range(6)]
VOCAB = (SPECIALS + [".", "the"] + STEMS + SUFFIXES
         + [f"d{d}s{s}" for d in range(NUM_DOCS) for s in range(NUM_SENTENCES)])
PAD, UNK, CLS, SEP, MASK = range(5)
ORIGIN = {i: tuple(map(int, m.groups())) for i, t in enumerate(VOCAB)
          if (m := re.fullmatch(r"d(\d+)s(\d+)", t))}  # id -> (document, sentence)

# The feature spec of google-research/bert run_pretraining.py, written out independently.
T, P = 64, 10
ORIGINAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([T], tf.int64),
    "input_mask": tf.io.FixedLenFeature([T], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([T], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


def write_corpus(directory, num_files, docs_per_file, sentences_per_doc, seed=0):
    """One-sentence-per-line files; returns their paths. Document ids run on across files."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths, d = [], 0
    for f in range(num_files):
        docs = []
        for _ in range(docs_per_file):
            docs.append("\n".join(" ".join([f"d{d}s{s}"] * rng.randint(2, 12)) + " ."
                                  for s in range(sentences_per_doc)))
            d += 1
        path = os.path.join(directory, f"part{f}.txt")
        with open(path, "w") as fh:
            fh.write("\n\n".join(docs) + "\n")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), num_files=6, docs_per_file=8,
                        sentences_per_doc=30)


def run(files, vocab_file, output_dir, **config):
    config = {"max_seq_length": T, "max_predictions_per_seq": P, "dupe_factor": 1,
              **config}
    num_workers = config.pop("num_workers", 1)
    return cpd.create_pretraining_data(files, vocab_file, str(output_dir),
                                       DataConfig(**config), num_workers=num_workers,
                                       shard_size=700, progress=False)


def read_records(output_dir):
    """All records, parsed with the original spec, as numpy arrays [N, ...]."""
    files = sorted(glob.glob(os.path.join(output_dir, "part-*.tfrecord")))
    records = [r.numpy() for f in files for r in tf.data.TFRecordDataset(f)]
    parsed = tf.io.parse_example(records, ORIGINAL_SPEC)
    return {k: v.numpy() for k, v in parsed.items()}


def unmasked(records):
    """input_ids with the masked-LM replacements undone."""
    ids = records["input_ids"].copy()
    rows, cols = np.nonzero(records["masked_lm_weights"])
    ids[rows, records["masked_lm_positions"][rows, cols]] = records["masked_lm_ids"][rows, cols]
    return ids


def origins(ids):
    return [ORIGIN[i] for i in ids if i in ORIGIN]


@pytest.fixture(scope="module")
def nsp_run(corpus, vocab_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("nsp")
    metadata = run(corpus, vocab_file, out, dupe_factor=6)
    return out, metadata, read_records(out)


# ---------------------------------------------------------------------------------
# Record layout

def test_records_have_the_original_features_and_layout(nsp_run):
    out, metadata, r = nsp_run
    n = len(r["input_ids"])
    assert n == metadata["num_instances"] > 1000
    shards = sorted(os.listdir(out))
    assert "metadata.json" in shards
    assert [s for s in shards if s.startswith("part-")] == [
        f"part-{j:05d}-of-{len(metadata['shards']):05d}.tfrecord"
        for j in range(len(metadata["shards"]))]
    assert sum(s["instances"] for s in metadata["shards"]) == n

    lengths = r["input_mask"].sum(1)
    positions = np.arange(T)
    # input_mask is 1 then 0; padding is 0 everywhere.
    np.testing.assert_array_equal(r["input_mask"], positions < lengths[:, None])
    assert np.all(r["input_ids"][positions >= lengths[:, None]] == 0)
    assert np.all(r["segment_ids"][positions >= lengths[:, None]] == 0)
    original = unmasked(r)  # a random replacement may be [SEP]
    for i in range(n):
        ids, seg, length = original[i], r["segment_ids"][i], lengths[i]
        seps = np.nonzero(ids[:length] == SEP)[0]
        assert ids[0] == CLS and len(seps) == 2 and seps[1] == length - 1
        # [CLS] A [SEP] is segment 0, B [SEP] segment 1.
        np.testing.assert_array_equal(seg[:length], positions[:length] > seps[0])
    assert set(np.unique(r["next_sentence_labels"])) == {0, 1}


def test_masked_lm_predictions_follow_the_original_rule(nsp_run):
    _, metadata, r = nsp_run
    lengths = r["input_mask"].sum(1)
    weights, pos = r["masked_lm_weights"], r["masked_lm_positions"]
    k = weights.sum(1).astype(int)
    # round(len(tokens) * 0.15), at least 1, at most P; weights are 1s then 0s.
    np.testing.assert_array_equal(k, np.minimum(P, np.maximum(1, np.round(lengths * 0.15))))
    np.testing.assert_array_equal(weights, np.arange(P) < k[:, None])
    assert np.all(pos[weights == 0] == 0) and np.all(r["masked_lm_ids"][weights == 0] == 0)
    original = unmasked(r)
    for i in range(len(pos)):
        p = pos[i, :k[i]]
        assert np.all(np.diff(p) > 0) and np.all(p < lengths[i])
        assert not np.isin(original[i, p], [CLS, SEP, PAD]).any()  # never [CLS]/[SEP]
    # About 15% of the non-special tokens are predicted (a bit more at T = 64: a full
    # sequence gets round(9.6) = 10 predictions for 61 tokens).
    fraction = k.sum() / (lengths - 3).sum()
    assert 0.145 < fraction < 0.17
    assert metadata["counts"]["masked_tokens"] == k.sum()


def replacement_rates(r):
    """Fractions of predictions shown as [MASK], as themselves, and as another token."""
    m = r["masked_lm_weights"] > 0
    shown = np.take_along_axis(r["input_ids"], r["masked_lm_positions"], 1)[m]
    labels = r["masked_lm_ids"][m]
    is_mask = shown == MASK
    is_same = ~is_mask & (shown == labels)
    return is_mask.mean(), is_same.mean(), (~is_mask & ~is_same).mean(), shown[
        ~is_mask & ~is_same]


def test_80_10_10_replacement(nsp_run):
    _, _, r = nsp_run
    mask, same, other, random_ids = replacement_rates(r)
    # ~15k predictions: the standard error of a 10% rate is 0.3%.
    assert abs(mask - 0.8) < 0.015 and abs(same - 0.1) < 0.012 and abs(other - 0.1) < 0.012
    # Random tokens come from the whole vocabulary (specials included), uniformly.
    assert abs(random_ids.mean() / len(VOCAB) - 0.5) < 0.05
    assert random_ids.min() < 100 and random_ids.max() > len(VOCAB) - 100


@pytest.mark.parametrize("rates", [(1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.0, 0.2, 0.8)])
def test_other_mask_rates(corpus, vocab_file, tmp_path, rates):
    """The paper's Table 8 masking ablations."""
    run(corpus[:3], vocab_file, tmp_path, mask_rates=rates, dupe_factor=2)
    mask, same, other, _ = replacement_rates(read_records(tmp_path))
    # A random token equals the original 1/len(VOCAB) of the time.
    np.testing.assert_allclose([mask, same, other], rates, atol=0.02)


def test_whole_word_masking_keeps_words_whole(vocab_file, tmp_path):
    rng = random.Random(1)

    def word():  # e.g. "w3x1x4" -> w3 ##x1 ##x4
        suffixes = [rng.choice(SUFFIXES)[2:] for _ in range(rng.randint(0, 3))]
        return rng.choice(STEMS) + "".join(suffixes)

    with open(tmp_path / "words.txt", "w") as f:
        for _ in range(30):
            for _ in range(20):
                f.write(" ".join(word() for _ in range(rng.randint(3, 15))) + " .\n")
            f.write("\n")
    out = tmp_path / "out"
    run([str(tmp_path / "words.txt")], vocab_file, out, do_whole_word_mask=True,
        dupe_factor=3)
    r = read_records(out)
    original, weights = unmasked(r), r["masked_lm_weights"]
    is_subword = np.array([t.startswith("##") for t in VOCAB])
    lengths = r["input_mask"].sum(1)
    whole_multi_piece = 0
    for i in range(len(original)):
        masked = set(r["masked_lm_positions"][i][weights[i] > 0].tolist())
        assert len(masked) <= P
        # Words: a start piece and the ## pieces after it (as the original groups them).
        words, current = [], None
        for j in range(1, lengths[i]):
            if original[i, j] in (CLS, SEP):
                continue
            if is_subword[original[i, j]] and current is not None:
                current.append(j)
            else:
                current = [j]
                words.append(current)
        for w in words:
            picked = [j in masked for j in w]
            assert all(picked) or not any(picked), (i, w, masked)
            whole_multi_piece += all(picked) and len(w) > 1
    assert whole_multi_piece > 200


# ---------------------------------------------------------------------------------
# Next sentence prediction

def check_next_sentences(r):
    original = unmasked(r)
    lengths = r["input_mask"].sum(1)
    for i in range(len(original)):
        ids = original[i, :lengths[i]]
        sep = np.nonzero(ids == SEP)[0][0]
        a, b = origins(ids[1:sep]), origins(ids[sep + 1:-1])
        docs_a, docs_b = {d for d, _ in a}, {d for d, _ in b}
        assert len(docs_a) == 1 and len(docs_b) == 1, "a segment spans documents"
        if r["next_sentence_labels"][i, 0] == 0:  # B is the text after A
            assert docs_a == docs_b
            assert max(s for _, s in a) < min(s for _, s in b)
        else:
            assert docs_a != docs_b, "a random next segment from the same document"


def test_next_sentence_labels(nsp_run):
    _, metadata, r = nsp_run
    rate = r["next_sentence_labels"].mean()
    # 1/2, plus the chunks of one sentence, which always get a random next.
    assert 0.47 < rate < 0.6
    check_next_sentences(r)
    assert metadata["counts"]["random_next_from_same_document"] == 0
    assert metadata["counts"]["next_sentence_random"] == r["next_sentence_labels"].sum()


def test_random_next_comes_from_other_files_when_a_file_is_one_document(vocab_file,
                                                                        tmp_path):
    """Like Gutenberg books: each file holds one long document."""
    files = write_corpus(tmp_path / "books", num_files=3, docs_per_file=1,
                         sentences_per_doc=NUM_SENTENCES)
    run(files, vocab_file, tmp_path / "out", dupe_factor=5)
    r = read_records(tmp_path / "out")
    assert r["next_sentence_labels"].sum() > 50
    check_next_sentences(r)


def test_against_tf_models_official_reference(vocab_file, tmp_path):
    """Summary statistics match tf-models-official's port of the original script."""
    from absl import flags
    try:
        from official.nlp.data import create_pretraining_data as ref
        from official.nlp.tools import tokenization as ref_tokenization
    except flags.DuplicateFlagError:
        pytest.skip("another test defined the reference script's absl flags")
    files = write_corpus(tmp_path / "c", num_files=8, docs_per_file=25,
                         sentences_per_doc=12)
    ref_instances = ref.create_training_instances(
        files, ref_tokenization.FullTokenizer(vocab_file, do_lower_case=True),
        ref.get_processor_text_fn(False, True), T, 4, 0.1, 0.15, P, random.Random(7))
    run(files, vocab_file, tmp_path / "out", dupe_factor=4)
    r = read_records(tmp_path / "out")
    ours = {"instances": len(r["input_ids"]),
            "length": r["input_mask"].sum(1).mean(),
            "full": (r["input_mask"].sum(1) >= T - 1).mean(),
            "predictions": r["masked_lm_weights"].sum(1).mean(),
            "random_next": r["next_sentence_labels"].mean()}
    lengths = np.array([len(x.tokens) for x in ref_instances])
    theirs = {"instances": len(ref_instances), "length": lengths.mean(),
              "full": (lengths >= T - 1).mean(),
              "predictions": np.mean([len(x.masked_lm_positions) for x in ref_instances]),
              "random_next": np.mean([x.is_random_next for x in ref_instances])}
    assert ours["instances"] == pytest.approx(theirs["instances"], rel=0.05)
    assert ours["length"] == pytest.approx(theirs["length"], rel=0.05)
    assert ours["full"] == pytest.approx(theirs["full"], abs=0.06)
    assert ours["predictions"] == pytest.approx(theirs["predictions"], rel=0.05)
    assert ours["random_next"] == pytest.approx(theirs["random_next"], abs=0.05)


# ---------------------------------------------------------------------------------
# Objectives without sentence pairs

def test_no_nsp_packs_contiguous_text(corpus, vocab_file, tmp_path):
    metadata = run(corpus[:3], vocab_file, tmp_path, objective="no_nsp", short_seq_prob=0)
    r = read_records(tmp_path)
    lengths = r["input_mask"].sum(1)
    assert np.all(r["segment_ids"] == 0) and np.all(r["next_sentence_labels"] == 0)
    original = unmasked(r)
    assert np.all(original[:, 0] == CLS)
    assert np.all(original[np.arange(len(lengths)), lengths - 1] == SEP)
    assert np.all((original == SEP).sum(1) == 1)
    assert np.all(r["masked_lm_weights"].sum(1) >= 1)
    # Filled to the end of each document, across sentence boundaries.
    num_documents = metadata["counts"]["documents"]
    assert np.sum(lengths < T) <= num_documents
    assert np.mean([len({s for _, s in origins(ids)}) > 1 for ids in original]) > 0.9


def test_ltr_writes_unmasked_contiguous_text(corpus, vocab_file, tmp_path):
    metadata = run(corpus[:3], vocab_file, tmp_path, objective="ltr")
    r = read_records(tmp_path)
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels", "segment_ids"):
        assert not r[name].any(), name
    assert not (r["input_ids"] == MASK).any()
    # Every token of the corpus is used exactly once, in order within an instance.
    assert (r["input_mask"].sum() - 2 * len(r["input_ids"])
            == metadata["counts"]["tokens"])
    for ids in r["input_ids"]:
        o = origins(ids)
        assert len({d for d, _ in o}) == 1
        steps = np.diff([s for _, s in o])
        assert np.all((steps == 0) | (steps == 1))


def test_dynamic_masking_records_are_unmasked(corpus, vocab_file, tmp_path):
    run(corpus[:2], vocab_file, tmp_path, dynamic_masking=True)
    r = read_records(tmp_path)
    assert not r["masked_lm_weights"].any() and not (r["input_ids"] == MASK).any()
    assert records_are_unmasked(f"{tmp_path}/part-*")
    assert 0.4 < r["next_sentence_labels"].mean() < 0.65
    check_next_sentences(r)


# ---------------------------------------------------------------------------------
# Determinism

def shard_bytes(output_dir):
    return {os.path.basename(f): open(f, "rb").read()
            for f in sorted(glob.glob(os.path.join(output_dir, "part-*")))}


def test_deterministic_for_a_seed_and_any_number_of_workers(corpus, vocab_file,
                                                            tmp_path, nsp_run):
    out, _, _ = nsp_run
    run(corpus, vocab_file, tmp_path / "again", dupe_factor=6)
    assert shard_bytes(tmp_path / "again") == shard_bytes(out)
    run(corpus, vocab_file, tmp_path / "two", dupe_factor=6, num_workers=2)
    assert shard_bytes(tmp_path / "two") == shard_bytes(out)
    run(corpus, vocab_file, tmp_path / "seed", dupe_factor=6, random_seed=1)
    assert shard_bytes(tmp_path / "seed") != shard_bytes(out)


def test_token_files_give_back_the_documents_as_written(tmp_path):
    """Each file is tokenized once, to disk, and read back by its own instances and by
    the other files' random-next windows: the same documents, in order, and those
    written before a read error (as the text reader yielded them before it)."""
    documents = [((3, 0), [[5, 6, 7], [8]]), ((3, 1), [[9]]),
                 ((3, 4), [[10, 11], [12, 13, 14], [15]])]

    def read_then_fail():
        yield from documents
        raise OSError("read error")

    prefix = str(tmp_path / "tokens-00003")
    with pytest.raises(OSError):
        cpd.write_token_file(read_then_fail(), prefix)
    assert list(cpd.read_token_file(prefix, 3)) == documents
    assert list(cpd.read_token_file(str(tmp_path / "never-written"), 4)) == []
    cpd.write_token_file(iter([]), prefix)
    assert list(cpd.read_token_file(prefix, 3)) == []


# ---------------------------------------------------------------------------------
# Bad input

def test_bad_inputs_are_skipped_and_counted(corpus, vocab_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n\n  \n")
    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes("d1s1 d1s1 caf\xe9 .\nd1s2 d1s2 .\n".encode("latin-1"))
    long_line = tmp_path / "long.txt"
    long_line.write_text(" ".join(["d2s3"] * 40_000) + "\n")  # 200 kB on one line
    missing = str(tmp_path / "missing.txt")
    files = [corpus[0], str(empty), str(blank), str(bad_utf8), str(long_line), missing,
             str(tmp_path)]  # a directory
    metadata = run(files, vocab_file, tmp_path / "out")
    counts = metadata["counts"]
    assert counts["files"] == len(files)
    assert counts["empty_files"] == 2 and counts["unreadable_files"] == 2
    assert counts["invalid_utf8_lines"] == 1
    assert counts["long_lines_split"] == 1
    # (the file named as records name it: bert_tf.portable_paths)
    assert len(metadata["skipped"]) == 4 and any(f"{portable_path(missing)}: unreadable" in s
                                                 for s in metadata["skipped"])
    saved = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert saved["counts"] == counts and saved["num_instances"] > 0


def test_zero_instances_is_an_error(vocab_file, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "stubs.txt").write_text('<doc id="1" title="A">\nA\n</doc>\n')
    with pytest.raises(ValueError, match="no training instances"):
        run([str(tmp_path / "empty.txt"), str(tmp_path / "stubs.txt")], vocab_file,
            tmp_path / "out")
    assert not glob.glob(str(tmp_path / "out" / "part-*"))
    counts = json.loads((tmp_path / "out" / "metadata.json").read_text())["counts"]
    assert counts["empty_files"] == 2 and counts["empty_documents"] == 1
    # The command line exits non-zero with the message.
    with pytest.raises(SystemExit) as exit_:
        run_main(cpd.main, ["--input_files", str(tmp_path / "*.txt"), "--vocab_file",
                            vocab_file, "--output_dir", str(tmp_path / "out2")])
    assert exit_.value.code == 2 and "no training instances" in capsys.readouterr().err


def test_input_patterns(corpus, tmp_path, capsys):
    root = os.path.dirname(corpus[0])
    files = cpd.expand_input_patterns(f"{root}/part1.txt, {root}/*.txt,{root}/**")
    assert files == [corpus[1]] + [c for c in sorted(corpus) if c != corpus[1]]
    with pytest.raises(ValueError, match="matches no file"):
        cpd.expand_input_patterns(f"{root}/*.txt,{root}/nothing*")
    with pytest.raises(SystemExit) as exit_:
        run_main(cpd.main, ["--input_files", f"{tmp_path}/nothing*", "--vocab_file", "v",
                            "--output_dir", str(tmp_path)])
    assert exit_.value.code == 2 and "matches no file" in capsys.readouterr().err
    args = cpd.build_parser().parse_args(["--input_files", f"{root}/*.txt", "--vocab_file",
                                          "v", "--output_dir", str(tmp_path)])
    assert (args.input_files, args.objective, args.dupe_factor) == (f"{root}/*.txt", "nsp", 10)


def test_existing_shards_are_not_overwritten_silently(corpus, vocab_file, tmp_path):
    run(corpus[:1], vocab_file, tmp_path)
    with pytest.raises(ValueError, match="already holds"):
        run(corpus[:1], vocab_file, tmp_path)


def test_a_killed_run_leaves_no_complete_looking_set(corpus, vocab_file, tmp_path,
                                                     monkeypatch):
    out = tmp_path / "out"

    def killed(metadata, output_dir):
        raise KeyboardInterrupt  # after the shards were moved in, before metadata.json

    monkeypatch.setattr(shard_set, "write_metadata", killed)
    with pytest.raises(KeyboardInterrupt):
        run(corpus[:2], vocab_file, out)
    monkeypatch.undo()
    assert glob.glob(str(out / "part-*")) and not (out / "metadata.json").exists()
    with pytest.raises(InputError, match="metadata.json: missing beside"):
        check_records(f"{out}/part-*", "--train_files", T, P, vocab_file)
    # What a kill -9 leaves (the temporary directory, atomic_open's file) goes on the
    # rerun; the incomplete set is named as such and replaced with --overwrite.
    (out / ".tmp-abc123").mkdir()
    (out / ".tmp-abc123" / "file-00000.tfrecord").write_bytes(b"partial")
    (out / "metadata.json.tmp999").write_text("{")
    with pytest.raises(ValueError, match="incomplete set"):
        run(corpus[:2], vocab_file, out)
    metadata = cpd.create_pretraining_data(corpus[:2], vocab_file, str(out), DataConfig(
        max_seq_length=T, max_predictions_per_seq=P, dupe_factor=1), shard_size=700,
        overwrite=True, progress=False)
    names = [s["file"] for s in metadata["shards"]]
    assert sorted(os.listdir(out)) == sorted(names + ["metadata.json"])
    assert [s["bytes"] for s in metadata["shards"]] == [os.path.getsize(out / n) for n in names]
    assert metadata["vocab_sha256"] == file_sha256(vocab_file)
    assert check_records(f"{out}/part-*", "--train_files", T, P, vocab_file) == sorted(
        str(out / n) for n in names)
    assert not records_are_unmasked(f"{out}/part-*")


def test_a_long_line_is_split_into_sentences_and_used(vocab_file, tmp_path):
    """A file with no line breaks: its sentences make the instances, not one truncated
    instance per 64 kB piece (before: ~0.5% of its tokens were used)."""
    rng = random.Random(0)
    line = " ".join(" ".join(rng.choice(STEMS) for _ in range(rng.randint(4, 20))) + " ."
                    for _ in range(6000))  # ~280 kB, every word one WordPiece
    (tmp_path / "one_line.txt").write_text(line)
    metadata = run([str(tmp_path / "one_line.txt")], vocab_file, tmp_path / "out",
                   objective="no_nsp")
    counts = metadata["counts"]
    assert counts["long_lines_split"] == 1 and counts["sentences"] == 6000
    assert counts["tokens"] == len(line.split())
    assert counts["maskable_tokens"] >= 0.95 * counts["tokens"]


# ---------------------------------------------------------------------------------
# Reading back

def test_decode_record_and_dataset(nsp_run):
    out, metadata, r = nsp_run
    pattern = os.path.join(out, "part-*.tfrecord")
    def first_batches(seed):
        ds = make_pretraining_dataset(pattern, 32, T, P, is_training=True, seed=seed)
        return list(ds.take(3))

    batches = first_batches(seed=1)
    for batch in batches:
        assert batch["input_ids"].shape == (32, T) and batch["input_ids"].dtype == tf.int32
        assert batch["masked_lm_weights"].dtype == tf.float32
        assert batch["next_sentence_labels"].shape == (32, 1)
    # Same seed, same stream (what exact resumption needs).
    for a, b in zip(batches, first_batches(seed=1), strict=True):
        np.testing.assert_array_equal(a["input_ids"], b["input_ids"])

    n = metadata["num_instances"]
    evaluation = make_pretraining_dataset(pattern, 16, T, P, is_training=False)
    assert sum(1 for _ in evaluation) == n // 16  # once, whole batches only
    # Two input pipelines (two hosts) read disjoint sets of shards, 8 rows each.
    read = collections.Counter()
    for pipeline in range(2):
        ds = make_pretraining_dataset(pattern, 8, T, P, False, pipeline=(pipeline, 2))
        batches = [x["input_ids"].numpy() for x in ds]
        assert batches[0].shape == (8, T)
        read.update(row.tobytes() for x in batches for row in x)
    written = collections.Counter(row.tobytes() for row in r["input_ids"].astype(np.int32))
    assert not read - written  # no record read twice
    assert sum(read.values()) > n - 2 * 8 * len(metadata["shards"])

    # Fewer shards than pipelines: the records are split instead.
    one_shard = os.path.join(out, metadata["shards"][0]["file"])
    for i in range(2):
        ds = make_pretraining_dataset(one_shard, 1, T, P, False, pipeline=(i, 2))
        num_read = sum(len(x["input_ids"]) for x in ds)
        assert abs(num_read - metadata["shards"][0]["instances"] / 2) <= 1

    serialized = next(iter(tf.data.TFRecordDataset(glob.glob(pattern)[0])))  # scalar
    single = decode_record(serialized, T, P)
    assert single["input_ids"].shape == (T,) and single["input_ids"].dtype == tf.int32


# ---------------------------------------------------------------------------------
# Real data

@pytest.mark.slow
def test_real_wikipedia_and_gutenberg_files(data_dir, tmp_path):
    files = [os.path.join(data_dir, "pretraining", "wikipedia_sample", "AA", "wiki_09"),
             os.path.join(data_dir, "pretraining", "gutenberg", "pg1080.txt")]
    vocab = os.path.join(data_dir, "bert_vocab", "bert-base-uncased", "vocab.txt")
    metadata = cpd.create_pretraining_data(
        files, vocab, str(tmp_path), DataConfig(dupe_factor=1), progress=False)
    counts = metadata["counts"]
    assert counts["documents"] > 400 and counts["empty_documents"] > 500  # redirects
    assert counts["invalid_utf8_lines"] == 0 and not metadata["skipped"]
    records = [r.numpy() for f in sorted(glob.glob(str(tmp_path / "part-*")))
               for r in tf.data.TFRecordDataset(f)]
    parsed = tf.io.parse_example(records, feature_spec(128, 20))
    lengths = parsed["input_mask"].numpy().sum(1)
    assert len(records) == metadata["num_instances"] > 800
    assert 0.47 < parsed["next_sentence_labels"].numpy().mean() < 0.6
    assert np.mean(lengths == 128) > 0.4
    k = parsed["masked_lm_weights"].numpy().sum(1)
    np.testing.assert_array_equal(k, np.minimum(20, np.maximum(1, np.round(lengths * 0.15))))
    # The Project Gutenberg header and licence are gone; the book's text is there.
    vocab_words = open(vocab, encoding="utf-8").read().split("\n")
    text = " ".join(vocab_words[i] for i in unmasked(
        {k: v.numpy() for k, v in parsed.items()}).ravel() if i).replace(" ##", "")
    assert "gutenberg" not in text and "ireland" in text


def test_input_caps_read_fewer_files_and_bytes(corpus, vocab_file, tmp_path, capsys):
    """A rehearsal's caps: the first file of each glob, the first bytes of each file."""
    root = os.path.dirname(corpus[0])
    patterns = f"{root}/part[0-2].txt,{root}/part[3-5].txt"
    assert cpd.expand_input_patterns(patterns, max_files_per_pattern=1) == \
        [corpus[0], corpus[3]]
    full = run(corpus[:2], vocab_file, tmp_path / "full")
    capped = run(corpus[:2], vocab_file, tmp_path / "capped", max_bytes_per_file=2000)
    assert 0 < capped["counts"]["tokens"] < full["counts"]["tokens"] / 4
    assert capped["config"]["max_bytes_per_file"] == 2000
    # The first documents are the same, only fewer of them.
    first = [d for d, _ in origins(read_records(tmp_path / "capped")["input_ids"].ravel())]
    assert max(first) < max(d for d, _ in origins(read_records(tmp_path / "full")
                                                  ["input_ids"].ravel()))
    cpd.main(["--input_files", patterns, "--vocab_file", vocab_file,
              "--output_dir", str(tmp_path / "cli"), "--max_seq_length", str(T),
              "--max_predictions_per_seq", str(P), "--dupe_factor", "1",
              "--max_files_per_pattern", "1", "--max_bytes_per_file", "2000"])
    metadata = json.loads((tmp_path / "cli" / "metadata.json").read_text())
    assert metadata["input_files"] == 2 and metadata["num_instances"] > 0
