"""Tests of the dry runs of every scale and strategy, and of the rehearsal
(`reproduce.rehearsal`): the paper plan's commands with only their budget capped.

The dry runs use a data directory of empty files (tests/test_reproduce.py's fixture);
the one rehearsal that runs the real CLIs is marked slow.
"""

import json
import os

import pytest

from harness_helpers import flags
from reproduce import all as harness
from reproduce import rehearsal
from reproduce.commands import STRATEGIES, Distribution, FinetuneCommand
from reproduce.experiments import TABLES, build_plan
from reproduce.plan import Run
from reproduce.records import base_record, load_record
from reproduce.scales import SCALES

from tests.test_reproduce import fake_data  # noqa: F401  (a pytest fixture)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("scale", list(SCALES))
def test_dry_run_prints_the_whole_plan(scale, strategy, fake_data, tmp_path, capsys):
    argv = ["--strategy", strategy, "--scale", scale, "--data_dir", fake_data,
            "--output_dir", str(tmp_path / "out"), "--work_dir", str(tmp_path / "w"),
            "--dry_run"]
    if strategy == "tpu":
        argv += ["--tpu", "my-tpu"]
    assert harness.main(argv) == 0
    text = capsys.readouterr().out
    plan = build_plan(scale, strategy, fake_data, str(tmp_path / "w"), tpu="my-tpu")
    assert f"strategy {strategy}, {len(plan.runs)} runs" in text
    assert all(run_id in text for run_id in plan.runs)
    assert "To run:" in text
    # The per-table estimate on the accelerators, after the plan.
    costs = text[text.index("Estimated on accelerators"):]
    assert all(table in costs for table in TABLES) and "TPU v3-8" in costs
    assert not (tmp_path / "out").exists() and not (tmp_path / "w").exists()


def test_rehearsal_caps_only_the_budget(fake_data, tmp_path):
    plan = build_plan("paper", "cpu", fake_data, str(tmp_path / "w"))
    rehearsed = rehearsal.rehearse_plan(plan)
    assert list(rehearsed.runs) == list(plan.runs)
    for run_id, run in plan.runs.items():
        capped = rehearsed.runs[run_id]
        assert (capped.module, capped.needs, capped.cells, capped.out_dir) == \
            (run.module, run.needs, run.cells, run.out_dir)
        assert capped.args == capped.config.argv()
        planned, ours = flags(run.args), flags(capped.args)
        # Every planned flag is still there, unchanged unless it is a recorded cap.
        assert set(planned) <= set(ours)
        changed = {k for k in ours if planned.get(k) != ours[k]}
        assert changed == set(capped.rehearsal), run_id
        for flag, (before, after) in capped.rehearsal.items():
            assert getattr(run.config, flag) == before and getattr(capped.config, flag) == after
        assert base_record(capped, rehearsed)["rehearsal"] == capped.rehearsal
    # BERT-Large with its phase 2 at 512 tokens is rehearsed as planned.
    large = rehearsed.runs["paper.pretrain.large-nsp"].config
    assert (large.config, large.phase2_seq_length, large.num_train_steps) == ("large", 512, 6)
    assert round(large.num_train_steps * large.phase2_fraction) >= 1


@pytest.mark.parametrize("size, rate", [("base", 5e-5), ("tiny", 1e-4)])
def test_a_rehearsal_without_named_rates_runs_the_first_of_the_grid_glue_suite_picks(
        size, rate):
    command = FinetuneCommand(task="rte", data_dir="d", output_dir="o", cache_dir="c",
                              distribution=Distribution("cpu"), seeds=3)
    run = Run("x", "finetune", command.MODULE, command.argv(), "o", config=command,
              info={"task": "rte", "model": {"size": size}, "bilstm_units": None})
    assert rehearsal.rehearse(run).config.learning_rates == (rate,)


def test_figure5_exports_scale_with_the_capped_steps(fake_data, tmp_path):
    plan = rehearsal.rehearse_plan(build_plan("paper", "cpu", fake_data, str(tmp_path)))
    for name in ("base-nsp", "base-ltr"):
        config = plan.runs[f"paper.pretrain.{name}"].config
        assert config.export_steps == (1, 2, 4, 5)
        assert config.save_checkpoints_steps == config.num_train_steps == 6
        for step, capped in zip((200_000, 400_000, 600_000, 800_000), config.export_steps):
            finetune = plan.runs[f"paper.finetune.{name}@{step}.mnli"]
            # The run keeps its planned name and reads the export at the scaled step.
            assert finetune.config.init_checkpoint.endswith(f"export_{capped}")


def test_rehearsal_defaults_to_its_own_directories(fake_data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert harness.main(["--strategy", "cpu", "--scale", "paper", "--rehearse",
                         "--data_dir", fake_data, "--runs", "paper.data.heldout-nsp",
                         "--dry_run"]) == 0
    text = capsys.readouterr().out
    assert "1 runs" in text and os.path.join("runs", "rehearsal", "work") in \
        build_plan("paper", "cpu", fake_data, rehearsal.WORK_DIR).runs[
            "paper.data.heldout-nsp"].out_dir
    assert rehearsal.OUTPUT_DIR.startswith(os.path.join("runs", "rehearsal"))
    assert not rehearsal.OUTPUT_DIR.startswith("results")


# The representative subset: Large phase 1 + 2, one GLUE task with its grid (MRPC on
# Large: 4 learning rates x 5 restarts planned), SQuAD v2.0 (trained on v1.1 where v2.0
# train is missing), the feature-based NER.
SUBSET = ("paper.finetune.large-nsp.mrpc,paper.finetune.large-nsp.squad2.0-main,"
          "paper.finetune.base-nsp-cased.conll2003-features-last")


@pytest.mark.slow
def test_paper_rehearsal_subset(data_dir, tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    code = harness.main(["--strategy", "cpu", "--scale", "paper", "--rehearse", "--quiet",
                         "--data_dir", data_dir, "--runs", SUBSET, "--output_dir", str(out),
                         "--work_dir", str(work)])
    assert code == 0
    records = [json.loads(p.read_text()) for p in out.glob("runs/*/record.json")]
    statuses = {r["run_id"]: r["status"] for r in records}
    assert "paper.pretrain.large-nsp" in statuses
    assert set(statuses.values()) <= {"finished", "unavailable"}, statuses
    assert all(r["rehearsal"] for r in records if r["status"] == "finished")
    large = load_record(str(out), "paper.pretrain.large-nsp")
    assert "--phase2_seq_length" in large["argv"]
    assert (out / "tables" / "table1.csv").exists()
    assert not work.exists()  # deleted once every run finished
