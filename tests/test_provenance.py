"""A record names the code it ran: commit, and what was uncommitted then; the harness
writes no record into the committed results/ from uncommitted code."""

import subprocess

import pytest

from bert_tf import provenance


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_git_commit_names_uncommitted_files_and_their_diff(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "model.py").write_text("a = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "record.json").write_text("{}\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")

    clean = provenance.git_commit(str(tmp_path))
    assert len(clean["commit"]) == 40
    assert (clean["dirty"], clean["changed_files"], clean["diff_sha256"]) == (False, [], None)

    # The harness rewrites results/ while it runs: that is not a change of code.
    (tmp_path / "results" / "record.json").write_text('{"status": "running"}\n')
    assert provenance.git_commit(str(tmp_path))["dirty"] is False

    (tmp_path / "model.py").write_text("a = 2\n")
    first = provenance.git_commit(str(tmp_path))
    assert first["dirty"] is True and first["changed_files"] == ["model.py"]
    (tmp_path / "model.py").write_text("a = 3\n")
    second = provenance.git_commit(str(tmp_path))
    assert len(first["diff_sha256"]) == 64 and first["diff_sha256"] != second["diff_sha256"]


def test_git_commit_outside_a_repository_is_unknown(tmp_path):
    assert provenance.git_commit(str(tmp_path)) == {
        "commit": None, "dirty": None, "changed_files": None, "diff_sha256": None}


def test_pretrain_config_names_the_code_and_the_machine(tmp_path):
    from bert_tf.pretrain import config_record
    from bert_tf.pretrain_config import PretrainConfig
    config = PretrainConfig("tiny", "nsp", "train-*", "vocab.txt", str(tmp_path))
    record = config_record(config, "python -m bert_tf.pretrain", 1, {"hidden_size": 128}, None)
    assert record["git"].keys() == {"commit", "dirty", "changed_files", "diff_sha256"}
    assert record["hardware"] == provenance.describe() and record["hardware"]["cpu_cores"] >= 1
    assert (record["command"], record["num_replicas"], record["model_dir"]) == (
        "python -m bert_tf.pretrain", 1, str(tmp_path))
    assert "init_checkpoint_source" not in record


DIRTY = {"commit": "c" * 40, "dirty": True, "changed_files": ["bert_tf/encoder.py", "x.py"],
         "diff_sha256": "0123456789abcdef" * 4}


def test_uncommitted_changes_name_the_files_and_the_diff():
    assert provenance.uncommitted(DIRTY) == (
        "uncommitted changes to bert_tf/encoder.py, x.py (diff sha256 0123456789ab)")
    assert provenance.uncommitted(DIRTY, named=1).startswith(
        "uncommitted changes to bert_tf/encoder.py and 1 more (")
    assert provenance.uncommitted({**DIRTY, "dirty": False}) == ""
    assert provenance.uncommitted({"commit": None, "dirty": None}) == ""


def test_harness_refuses_a_dirty_tree_for_the_committed_results(tmp_path, monkeypatch, capsys):
    from reproduce import all as harness
    committed = tmp_path / "repo" / "results"
    monkeypatch.setattr(harness, "COMMITTED_RESULTS", str(committed))
    monkeypatch.setattr(provenance, "git_commit", lambda: DIRTY)
    committed.parent.mkdir()
    monkeypatch.chdir(committed.parent)

    # The default --output_dir (results) of a run from the repository: refused, one line.
    argv = ["--strategy", "cpu", "--scale", "smoke", "--data_dir", str(tmp_path / "none")]
    assert harness.main(argv) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[-1] == (
        "error: uncommitted changes to bert_tf/encoder.py, x.py (diff sha256 0123456789ab): "
        "records in results must name committed code; commit first, or pass --allow_dirty "
        "(the records then name these files and the diff)")
    assert not committed.exists()  # nothing written

    error = harness.dirty_tree_error
    assert error(str(committed / "sub"), allow_dirty=False)
    assert error("results", allow_dirty=True) == ""
    # Other directories (a rehearsal's, a test's) only record the diff.
    assert error(str(tmp_path / "runs" / "rehearsal" / "results"), allow_dirty=False) == ""
    assert error(str(tmp_path / "repo" / "results2"), allow_dirty=False) == ""
    monkeypatch.setattr(provenance, "git_commit", lambda: {**DIRTY, "dirty": False})
    assert error("results", allow_dirty=False) == ""


@pytest.mark.parametrize("flags, isa, native", [
    ({"avx2", "avx512f", "avx512_bf16", "amx_bf16"}, "AMX", True),
    ({"avx2", "avx512f", "avx512_bf16"}, "AVX-512 BF16", True),
    ({"avx2", "avx512f"}, "AVX-512", False),
    ({"sse4_2", "avx2", "fma"}, "AVX2", False),
    (set(), None, None),  # no /proc/cpuinfo: unknown, and the plan runs as planned
])
def test_cpu_isa_and_native_bfloat16_from_the_flags(flags, isa, native, monkeypatch):
    monkeypatch.setattr(provenance, "cpu_flags", lambda: flags)
    assert provenance.cpu_isa() == isa and provenance.native_bfloat16() is native
    hw = {"cpu": "AMD EPYC", "cpu_isa": isa, "cpu_cores": 2, "memory_gib": 23.5,
          "packages": {"tensorflow": "2.20.0"}}
    assert provenance.summary(hw).startswith(f"AMD EPYC ({isa}) x2" if isa else "AMD EPYC x2")
