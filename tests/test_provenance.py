"""A record names the code it ran: commit, and what was uncommitted then."""

import subprocess

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
