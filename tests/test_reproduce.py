"""Tests of the experiment harness: plans, resumable execution, tables, paper numbers.

Everything here runs in seconds on synthetic inputs (a data directory of empty files in
the standard layout, a stand-in CLI, hand-written records), except the one smoke-scale
end-to-end test, which drives the real CLIs and is marked slow.
"""

import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from glue_suite.tasks import TASKS
from harness_helpers import flags, run_plan_stopped_once
from reproduce import all as harness
from reproduce import paper_numbers as paper
from reproduce import tables
from reproduce.commands import COMMANDS
from reproduce.cost_model import (BUCKETED_TOKENS, CPU_FINETUNE, CPU_PRETRAIN_EXAMPLES_PER_S,
                                  NER_SENTENCE_TOKENS, _lstm_seconds, bilstm_flops,
                                  cpu_finetune_seconds, cpu_pretrain_gflops,
                                  cpu_step_fixed_s, cpu_training_seconds, encoder_flops,
                                  pretrain_flops, seconds_for)
from reproduce.experiments import EXPERIMENTS, TABLES, build_plan
from reproduce.models import parameters
from reproduce.plan import Cell, Plan, Run
from reproduce.records import load_record, record_path, write_record
from reproduce.report import duration
from reproduce.runner import run_plan
from reproduce.scales import CPU, SCALES
from reproduce.units import plan_units

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER_FILE = os.path.join(REPO, "..", "shared", "paper", "README.md")

# What this machine's data directory holds (data README): no QQP, no QNLI/SQuAD v2.0
# train, no SWAG; MNLI train only as the 20k subset.
AVAILABLE = [
    *(f"glue_data/{t}/{s}.tsv" for t in ("CoLA", "SST-2", "MRPC", "STS-B", "RTE", "WNLI")
      for s in ("train", "dev", "test")),
    "glue_data/QNLI/dev.tsv", "glue_data/QNLI/test.tsv",
    "glue_data/MNLI/train.random-subset-20000.tokenized.tsv",
    "multinli_1.0/multinli_1.0_dev_matched.csv", "multinli_1.0/multinli_1.0_dev_mismatched.csv",
    "squad/v1.1/dev-v1.1.json", "squad/v1.1/train-v1.1.reconstructed.json.gz",
    "squad/v2.0/dev-v2.0.json",
    "conll2003/eng.train", "conll2003/eng.testa", "conll2003/eng.testb",
    "bert_vocab/bert-base-uncased/vocab.txt", "bert_vocab/bert-base-cased/vocab.txt",
    "pretraining/wikipedia_sample/AA/wiki_00", "pretraining/wikipedia_sample/AA/wiki_09",
    "pretraining/wikipedia_2015/AA/wiki_00", "pretraining/wikipedia_2015/AA/wiki_50",
    "pretraining/wikipedia_2015/AA/wiki_59",
    *(f"pretraining/gutenberg/pg{n}.txt" for n in (1080, 1952, 7256, 11)),
]


@pytest.fixture
def fake_data(tmp_path):
    root = tmp_path / "data"
    for relpath in AVAILABLE:
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x" * 1000)
    return str(root)


def _plan(scale, data_dir, tmp_path, **kwargs):
    return build_plan(scale, "cpu", data_dir, str(tmp_path / "work"), **kwargs)


# ------------------------------------------------------------------------------ plans
@pytest.mark.parametrize("scale", sorted(SCALES))
def test_plan_is_ordered_and_consistent(scale, fake_data, tmp_path):
    plan = _plan(scale, fake_data, tmp_path)
    seen = set()
    for run_id, run in plan.runs.items():
        assert run_id == run.run_id and run_id.startswith(f"{scale}.{run.stage}.")
        assert set(run.needs) <= seen, f"{run_id} runs before what it needs"
        seen.add(run_id)
        assert {c.table for c in run.cells} <= set(TABLES)
        args = list(run.args)
        if "--init_checkpoint" in args:  # reads the export of the run it needs
            checkpoint = args[args.index("--init_checkpoint") + 1]
            assert any(checkpoint.startswith(plan.runs[n].out_dir) for n in run.needs)
        assert run.out_dir.startswith(str(tmp_path / "work"))
    cells = [c for r in plan.runs.values() for c in r.cells]
    assert len(cells) == len(set(cells)), "a cell is filled by two runs"
    expected = set(TABLES) - ({"table4"} if scale == "smoke" else set())  # smoke: no SWAG
    assert {c.table for c in cells} == expected, "every table has runs"


def test_paper_plan_uses_the_papers_settings(fake_data, tmp_path):
    plan = _plan("paper", fake_data, tmp_path)
    base = plan.runs["paper.pretrain.base-nsp"]
    args = dict(zip(base.args[::2], base.args[1::2]))
    assert (args["--global_batch_size"], args["--num_train_steps"], args["--learning_rate"],
            args["--num_warmup_steps"], args["--phase2_seq_length"]) == (
        "256", "1000000", "0.0001", "10000", "512")
    assert float(args["--phase2_fraction"]) == pytest.approx(0.1)
    # Table 6: the paper's six sizes; Table 8: six masking rates; all pretrained 1M steps.
    sizes = {r.info["model"]["size"] for r in plan.runs.values() if r.stage == "pretrain"}
    assert {"L3_H768_A12", "L6_H768_A3", "L6_H768_A12", "base", "L12_H1024_A16",
            "large"} <= sizes
    masks = {tuple(r.info["model"]["mask_rates"]) for r in plan.runs.values()
             if r.stage == "pretrain"}
    assert masks == set(paper.TABLE8_RATES.values())
    # GLUE: the task's own grid (no --learning_rates), restarts for Table 6.
    mrpc = plan.runs["paper.finetune.base-nsp.mrpc"]
    assert "--learning_rates" not in mrpc.args and "--max_train_examples" not in mrpc.args
    assert mrpc.args[mrpc.args.index("--seeds") + 1] == "5"
    # Table 7 is cased, as in the paper.
    assert "paper.pretrain.large-nsp-cased" in plan.runs


def test_missing_data_gives_reasons_not_runs(fake_data, tmp_path):
    plan = _plan("cpu", fake_data, tmp_path)
    reasons = {r.run_id: r.unavailable for r in plan.runs.values()}
    assert reasons["cpu.finetune.default.qqp"] == "no QQP data"
    assert reasons["cpu.finetune.default.qnli"] == "no QNLI train data"
    assert reasons["cpu.finetune.default.swag"] == "no SWAG data"
    # Without SQuAD v2.0 train data, Table 3 trains on v1.1 and says so.
    squad2 = plan.runs["cpu.finetune.default.squad2.0"]
    assert reasons["cpu.finetune.default.squad2.0"] is None
    assert squad2.args[squad2.args.index("--train_task") + 1] == "squad1.1"
    assert any("no SQuAD v2.0 train data" in n for n in squad2.info["data_notes"])
    assert reasons["cpu.finetune.default.mnli"] is None
    notes = plan.runs["cpu.finetune.default.mnli"].info["data_notes"]
    assert notes and "20k" in notes[0]


def test_cpu_plan_pretrains_each_tables_models_by_one_recipe_in_units(fake_data, tmp_path):
    plan = _plan("cpu", fake_data, tmp_path)
    pretrain = [r for r in plan.runs.values() if r.stage == "pretrain"]
    assert {r.info["model"]["size"] for r in pretrain} == {"tiny", "L4_H128_A2"}
    # Equal budget for every objective, masking and size (Tables 5, 6 and 8, Figure 5),
    # the runs named by the recipe; Table 6's Tiny is Table 5's model.
    table6 = {r.run_id for r in pretrain if "table6" in r.tables}
    recipe = CPU.pretraining
    label = recipe.label
    assert table6 == {f"cpu.pretrain.tiny-nsp-{label}", f"cpu.pretrain.L4_H128_A2-nsp-{label}"}
    assert {"table5", "table6"} <= set(plan.runs[f"cpu.finetune.tiny-nsp-{label}.mrpc"].tables)
    for run in pretrain:
        assert run.run_id.endswith(f"-{recipe.label}")
        args = flags(run.args)
        assert (int(args["num_train_steps"]), int(args["global_batch_size"]),
                float(args["learning_rate"]), args["precision"]) == (
            recipe.steps, recipe.batch_size, recipe.learning_rate, recipe.precision)
        assert (None if "dropout" not in args else float(args["dropout"])) \
            == recipe.dropout == run.info["model"]["dropout"]
        # The same held-out sequences for every size: per-sequence losses pair up.
        assert int(args["eval_steps"]) * recipe.batch_size == CPU.eval_sequences
        # LTR scores 20 sampled next tokens, as many predictions as MLM: the same cost.
        assert args.get("ltr_predictions") == (
            "20" if run.info["model"]["objective"] == "ltr" else None)
        assert run.estimate_s <= 110 * 60, (run.run_id, run.estimate_s)
    # The + BiLSTM row on its claim's column only; Figure 5's earlier points one restart.
    assert sorted(r.info["task"] for r in plan.runs.values() if r.info.get("head") == "bilstm") \
        == ["squad1.1"]
    for run in (r for r in plan.runs.values() if "figure5" in r.tables):
        last = run.info["pretrain_step"] == CPU.figure5_steps[-1]
        assert run.args[run.args.index("--seeds") + 1] == ("3" if last else "1"), run.run_id
    ltr_finetunes = [r for r in plan.runs.values() if r.stage == "finetune"
                     and r.info["model"].get("objective") == "ltr"]
    assert ltr_finetunes and all(
        any("20 sampled next-token predictions" in n for n in r.info["data_notes"])
        for r in ltr_finetunes)
    units = plan_units(plan)
    assert sorted(k for u in units for k in u.run_ids) == sorted(plan.runs)
    assert [u.name for u in units if any(plan.runs[k].stage == "pretrain" for k in u.run_ids)] \
        == [r.run_id.split(".", 2)[2] for r in pretrain]


def test_smoke_plan_takes_minutes(fake_data, tmp_path):
    plan = _plan("smoke", fake_data, tmp_path)
    assert plan.total_estimate() < 20 * 60
    for run in plan.runs.values():
        if run.stage == "finetune":
            assert "--max_train_examples" in run.args and "--max_eval_examples" in run.args


def test_select_keeps_dependencies(fake_data, tmp_path):
    plan = _plan("cpu", fake_data, tmp_path, tables=["table6"])
    stages = {r.stage for r in plan.runs.values()}
    assert stages == {"data", "pretrain", "finetune"}
    assert all("table6" in r.tables for r in plan.runs.values() if r.stage == "finetune")
    full = _plan("cpu", fake_data, tmp_path)
    # --only never changes a command, so records stay valid across selections.
    for run_id, run in plan.runs.items():
        assert full.runs[run_id].args == run.args


def test_dynamic_masking_reads_one_unmasked_record_set_for_every_mask_mix(
        fake_data, tmp_path, monkeypatch):
    recipe = dataclasses.replace(CPU.pretraining, dynamic_masking=True)
    monkeypatch.setitem(SCALES, "cpu", dataclasses.replace(CPU, pretraining=recipe))
    plan = _plan("cpu", fake_data, tmp_path)

    def data_run(pretrain, flag):
        return next(plan.runs[n] for n in pretrain.needs
                    if flags(pretrain.args)[flag].startswith(plan.runs[n].out_dir + os.sep))

    pretrain = {r.run_id: r for r in plan.runs.values() if r.stage == "pretrain"}
    table8 = [r for r in pretrain.values() if r.info["model"]["size"] == CPU.ablation_size
              and r.info["model"]["objective"] == "nsp"]
    assert sorted(tuple(r.info["model"]["mask_rates"]) for r in table8) == sorted(
        paper.TABLE8_RATES[row] for row in CPU.mask_rows)
    train_data = {data_run(r, "train_files").run_id for r in table8}
    assert train_data == {"cpu.data.nsp-unmasked"}
    assert "--dynamic_masking" in plan.runs["cpu.data.nsp-unmasked"].args
    for run in table8:
        rates = tuple(run.info["model"]["mask_rates"])
        assert "--dynamic_masking" in run.args
        assert flags(run.args).get("mask_rates") == (
            None if rates == paper.PRETRAINING["mask_rates"]
            else ",".join(str(r) for r in rates)), run.run_id
        # Every model is scored on the same masked held-out records.
        heldout = data_run(run, "eval_files")
        assert heldout.run_id == "cpu.data.heldout-nsp"
        assert "--dynamic_masking" not in heldout.args
    # LTR predicts next tokens: its records and run have nothing to mask.
    ltr = next(r for r in pretrain.values() if r.info["model"]["objective"] == "ltr")
    assert "--dynamic_masking" not in ltr.args
    assert "--dynamic_masking" not in data_run(ltr, "train_files").args


def test_figure5_reads_intermediate_exports(fake_data, tmp_path):
    plan = _plan("cpu", fake_data, tmp_path)
    label = CPU.pretraining.label
    pretrain = plan.runs[f"cpu.pretrain.tiny-nsp-{label}"]
    assert pretrain.unavailable is None
    assert pretrain.args[pretrain.args.index("--export_steps") + 1] == "3000,7500"
    early = plan.runs[f"cpu.finetune.tiny-nsp-{label}@3000.mnli"]
    assert early.unavailable is None and early.info["pretrain_step"] == 3000
    checkpoint = early.args[early.args.index("--init_checkpoint") + 1]
    assert checkpoint == os.path.join(pretrain.out_dir, "export_3000")
    # Figure 5 is Tiny's: Table 6's larger model has no exports.
    assert "--export_steps" not in plan.runs[f"cpu.pretrain.L4_H128_A2-nsp-{label}"].args


def test_every_table_has_an_experiment_and_paper_numbers():
    assert TABLES == tuple(EXPERIMENTS)
    assert set(TABLES) == set(paper.TITLES) == set(paper.REPRODUCED_ROWS)


def test_cost_model_reproduces_the_measured_step_costs():
    """A step of each measured model is its fixed part plus its FLOPs at its GFLOP/s;
    models between them fall between their neighbours; nothing measured for GPUs."""
    for size, cost in CPU_FINETUNE.items():
        flops = encoder_flops(size, 64)
        assert cpu_training_seconds(32, size, 64, 32) == pytest.approx(
            cost.fixed_s + 32 * flops / (cost.gflops * 1e9))
        at_128 = encoder_flops(size, 128)  # where each model's rate was anchored
        assert seconds_for("cpu", 1e9 / at_128, at_128) == pytest.approx(1 / cost.gflops)
    gflops = {size: cost.gflops for size, cost in CPU_FINETUNE.items()}
    mini = encoder_flops("mini", 128) / seconds_for("cpu", 1, encoder_flops("mini", 128)) / 1e9
    assert gflops["tiny"] < mini < gflops[None] < gflops["base"]
    # Mini's fixed part: the nearer measured model's (MiniLM), in proportion to the weights.
    assert cpu_step_fixed_s("mini") == pytest.approx(
        CPU_FINETUNE[None].fixed_s * parameters("mini") / parameters(None))
    assert seconds_for("gpu", 1, encoder_flops("base", 128)) is None


def test_bucketed_tokens_count_an_epoch_as_glue_suites_batches_cut_it():
    """Within one chunk of CHUNK_BATCHES batches the rows are sorted whatever the shuffle,
    so the measured tokens per row equal those of glue_suite's own training batches."""
    from glue_suite.batching import train_dataset
    from reproduce.bucketed_tokens import epoch_tokens_per_row
    lengths = np.random.default_rng(0).integers(1, 129, size=200)
    mask = (np.arange(128)[None, :] < lengths[:, None]).astype("int32")
    batches = train_dataset(({"input_mask": mask}, np.zeros(200)), batch_size=32, seed=1,
                            length_multiple=1)
    padded = sum(int(np.prod(inputs["input_mask"].shape)) for inputs, _ in batches)
    assert epoch_tokens_per_row(lengths, 32) == pytest.approx(padded / 200)
    assert epoch_tokens_per_row(np.full(50, 7), 32) == 7


def _timed_record(out, run_id, task, size, features, seconds, isa="AVX-512 BF16", **info):
    """A finished fine-tuning run's record, as the harness leaves it (its "result" is the
    run's metrics.json)."""
    settings = {"learning_rates": [1e-4], "seeds": 2, "max_train_examples": None}
    restarts = [{"learning_rate": 1e-4, "seed": seed} for seed in (0, 1)]
    write_record(str(out), {
        "run_id": run_id, "stage": "finetune", "status": "finished",
        "hardware": {"cpu_isa": isa},
        "info": {"task": task, "train_task": task, "model": {"size": size},
                 "settings": settings, "head": None, "feature_mode": None, **info},
        "result": {"train_features": features, "timings": {"train_steps": seconds},
                   "grid": {"runs": restarts},
                   "config": {"train": {"epochs": 3, "batch_size": 32}}}})


def test_calibration_fits_a_steps_fixed_part_and_rate_from_the_runs(tmp_path):
    """Runs whose steps cost exactly 10 ms plus their FLOPs at 200 GFLOP/s give back those
    two figures; runs on another instruction set or with a BiLSTM are left out."""
    from reproduce import calibration
    out = tmp_path / "results"
    for task, features in (("sst2", 3200), ("mnli", 6400), ("conll2003", 1600)):
        steps = 2 * 3 * features // 32
        flops = 32 * encoder_flops("tiny", BUCKETED_TOKENS[task])
        _timed_record(out, f"cpu.finetune.tiny.{task}", task, "tiny", features,
                      steps * (0.010 + flops / 200e9))
    _timed_record(out, "cpu.finetune.tiny.rte", "rte", "tiny", 3200, 999.0, isa="AVX2")
    _timed_record(out, "cpu.finetune.tiny.squad1.1", "squad1.1", "tiny", 3200, 999.0,
                  head="bilstm")
    runs = calibration.timed_runs(str(out), "AVX-512 BF16")
    assert sorted(r.run_id for r in runs) == [
        "cpu.finetune.tiny.conll2003", "cpu.finetune.tiny.mnli", "cpu.finetune.tiny.sst2"]
    fixed_s, gflops = calibration.fit(runs)
    assert fixed_s == pytest.approx(0.010, rel=1e-6) and gflops == pytest.approx(200, rel=1e-6)


def test_the_plan_shows_what_finished_runs_took_beside_their_estimates(fake_data, tmp_path):
    from reproduce.report import print_plan
    plan = _plan("smoke", fake_data, tmp_path)
    first, second = list(plan.runs)[:2]
    statuses = {k: "todo" for k in plan.runs} | {first: "finished", second: "finished"}
    out = io.StringIO()
    print_plan(plan, statuses, took={first: 150.0, second: 30.0}, out=out)
    lines = out.getvalue().splitlines()
    row = next(line for line in lines if first in line)
    assert row.split()[:3] == ["finished", duration(plan.runs[first].estimate_s), "2m"]
    estimated = plan.runs[first].estimate_s + plan.runs[second].estimate_s
    assert (f"finished 2 (took 3m by their records, on the machines that ran them; "
            f"estimated {duration(estimated)})") in lines[-1]


def test_cost_model_reproduces_the_measured_pretraining_anchors():
    for precision, rates in CPU_PRETRAIN_EXAMPLES_PER_S.items():
        for size, rate in rates.items():
            flops = pretrain_flops(size, "nsp", 128, 20)
            assert cpu_pretrain_gflops(flops, precision) * 1e9 / flops == pytest.approx(rate)
    flops = pretrain_flops("small", "nsp", 128, 20)
    assert cpu_pretrain_gflops(flops, "float32") < cpu_pretrain_gflops(flops, "mixed_bfloat16")
    # LTR predicting every next token: ~4x an MLM sequence for Tiny (measured 4.0x: 1,569 s
    # against 397 s for 1000 x 32, the records of cpu.pretrain.tiny-{ltr,nsp} at 7ced042);
    # 20 sampled next tokens cost what MLM's 20 masked positions cost.
    ratio = pretrain_flops("tiny", "ltr", 128, 20) / pretrain_flops("tiny", "nsp", 128, 20)
    assert 3 < ratio < 6
    assert pretrain_flops("tiny", "ltr", 128, 20, ltr_predictions=20) == \
        pretrain_flops("tiny", "nsp", 128, 20)


# Fine-tuning runs of the cpu plan on the AVX-512 BF16 EPYC, 2026-11-28 (their records'
# metrics.json "train_steps" seconds over their steps; `python -m reproduce.calibration`):
# (size, task): (training examples a restart, restarts x epochs, seconds).
MEASURED_RUNS = {("tiny", "sst2"): (10_000, 9, 47.1), ("tiny", "mnli"): (20_000, 9, 169.7),
                 ("tiny", "mrpc"): (3668, 9, 37.0), ("tiny", "conll2003"): (5000, 9, 103.4),
                 ("tiny", "squad1.1"): (5041, 9, 161.6), (None, "sst2"): (67_349, 9, 2418.6),
                 (None, "mnli"): (20_000, 9, 1769.2), (None, "rte"): (2490, 9, 365.3)}


def test_cost_model_reproduces_measured_fine_tuning_runs():
    """Bucketed lengths and the fixed part of a step: Tiny's SST-2 steps cost half of
    MNLI's, not the ratio of their lengths, and the estimates stay within the spread of
    the measurements."""
    for (size, task), (examples, passes, seconds) in MEASURED_RUNS.items():
        estimate = passes * cpu_training_seconds(examples, size, BUCKETED_TOKENS[task], 32)
        assert 0.8 < estimate / seconds < 1.25, (size, task, estimate, seconds)


def test_cost_model_reproduces_measured_feature_based_ner():
    """Tiny's frozen pass over 5,000 CoNLL-2003 training rows took 3.52 s (the record of
    cpu.finetune.tiny-nsp.conll2003-features-concat_last_four, 2026-11-28); a 128-unit
    BiLSTM over MiniLM's four concatenated layers trained on 5,000 sentences (1 epoch) in
    20.8 s and predicted dev + test (6,707 sentences) in 7.5 s (alone, 2026-11-26)."""
    width, units = 4 * 384, 128
    for estimate, seconds in (
            (cpu_finetune_seconds(5000, "tiny", encoder_flops(
                "tiny", BUCKETED_TOKENS["conll2003"], train=False)), 3.52),
            (_lstm_seconds("cpu", 5000, bilstm_flops(width, units, NER_SENTENCE_TOKENS)), 20.8),
            (_lstm_seconds("cpu", 6707, bilstm_flops(width, units, NER_SENTENCE_TOKENS,
                                                     train=False)), 7.5)):
        assert 0.7 < estimate / seconds < 1.4, (estimate, seconds)


def test_feature_based_runs_of_a_model_share_its_frozen_pass(fake_data, tmp_path):
    plan = _plan("cpu", fake_data, tmp_path)
    rows = [r for r in plan.runs.values()
            if r.info.get("feature_mode") and r.info["model"]["size"] is None]
    assert len(rows) == 6  # Table 7's feature-based rows, on the shipped checkpoint
    first, *rest = rows
    # The first computes the frozen layers; the others read them, so each costs less than
    # the first unless its BiLSTM is wider (four layers concatenated: 4x the inputs).
    same_width = [r for r in rest if r.info["feature_mode"] != "concat_last_four"]
    assert first.info["feature_mode"] != "concat_last_four" and len(same_width) == 4
    assert all(r.estimate_s < first.estimate_s for r in same_width)


# ---------------------------------------------------------------- running and resuming
FAKE_CLI = textwrap.dedent('''
    """A stand-in CLI: counts its calls, fails or writes metrics.json as told."""
    import json, os, sys, time
    out, mode = sys.argv[sys.argv.index("--output_dir") + 1], sys.argv[-1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "calls"), "a") as f:
        f.write("x")
    began = time.time()
    if mode == "slow":
        time.sleep(2)
    if mode == "stoppable" and len(open(os.path.join(out, "calls")).read()) == 1:
        import signal  # as bert_tf.pretrain: a SIGTERM ends the step, saves and says so
        stop = []
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
        open(os.path.join(out, "started"), "w").close()
        while not stop:
            time.sleep(0.01)
        print("stopped by SIGTERM at step 3 of 9: checkpoint saved", flush=True)
        sys.exit(143)
    json.dump([began, time.time()], open(os.path.join(out, "span.json"), "w"))
    if mode == "fail":
        sys.exit("error: told to fail")
    if mode == "killed":  # as glue_suite.run, which leaves SIGTERM to Python's default
        import signal
        print("step 52/948 (5%), loss 4.8653", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    json.dump({"task": "mrpc", "metrics": {"accuracy": 80.0}, "learning_rate": 2e-5,
               "grid": {"best_learning_rate": 2e-5, "by_learning_rate": [
                   {"learning_rate": 2e-5, "runs": 2, "mean": {"accuracy": 79.0},
                    "std": {"accuracy": 1.4}}]}},
              open(os.path.join(out, "metrics.json"), "w"))
''')


@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    (tmp_path / "fake_cli.py").write_text(FAKE_CLI)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return tmp_path


def _fake_plan(tmp_path, modes):
    runs = {}
    for name, mode in modes.items():
        out = str(tmp_path / "work" / name)
        needs = ("t.finetune.a",) if name == "c" else ()
        runs[f"t.finetune.{name}"] = Run(
            f"t.finetune.{name}", "finetune", "fake_cli", ("--output_dir", out, mode), out,
            needs=needs, cells=(Cell("table5", "BERT-BASE", "MRPC", "accuracy"),),
            info={"task": "mrpc", "model": {"size": "tiny"}})
    return Plan("smoke", "cpu", runs)


def _calls(tmp_path, name):
    path = tmp_path / "work" / name / "calls"
    return len(path.read_text()) if path.exists() else 0


def test_finished_runs_are_skipped_and_interrupted_ones_rerun(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "ok", "b": "ok"})
    assert run_plan(plan, out, str(tmp_path), echo=False) == {
        "t.finetune.a": "finished", "t.finetune.b": "finished"}
    record = load_record(out, "t.finetune.a")
    assert record["status"] == "finished" and record["metrics"] == {"accuracy": 80.0}
    assert record["command"].startswith("python -m fake_cli")
    assert {"commit", "dirty"} <= record["git"].keys() and record["hardware"]["cpu_cores"] >= 1
    assert record["wall_seconds"] >= 0 and record["outputs"]["files"] == ["metrics.json"]
    assert os.path.isfile(os.path.join(out, "runs", "t.finetune.a", "files", "metrics.json"))

    run_plan(plan, out, str(tmp_path), echo=False)  # everything finished: no calls
    assert (_calls(tmp_path, "a"), _calls(tmp_path, "b")) == (1, 1)

    # A run killed mid-way leaves its "running" record: only it runs again.
    killed = load_record(out, "t.finetune.b")
    write_record(out, {**killed, "status": "running"})
    run_plan(plan, out, str(tmp_path), echo=False)
    assert (_calls(tmp_path, "a"), _calls(tmp_path, "b")) == (1, 2)
    assert load_record(out, "t.finetune.b")["status"] == "finished"
    assert not [p for p in os.listdir(os.path.join(out, "runs", "t.finetune.b"))
                if ".tmp" in p], "record.json is written atomically"


def test_a_cli_killed_by_a_signal_is_recorded_as_killed_not_by_its_last_line(fake_cli,
                                                                             tmp_path):
    out = str(tmp_path / "results")
    assert run_plan(_fake_plan(tmp_path, {"a": "killed"}), out, str(tmp_path),
                    echo=False) == {"t.finetune.a": "failed"}
    record = load_record(out, "t.finetune.a")
    assert record["reason"] == "exit -15: killed by SIGTERM"
    assert "step 52/948" in record["log_tail"]


def test_sigterm_stops_the_running_cli_which_says_where_and_a_rerun_resumes(fake_cli,
                                                                            tmp_path):
    """reproduce.all's SIGTERM handler passes the stop to the running CLI and waits for it
    (pretraining saves its step first); the record says how it ended, the log keeps the
    CLI's last line, and the next invocation reruns it."""
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "stoppable", "b": "ok"})
    run_plan_stopped_once(tmp_path / "work" / "a" / "started", plan, out, str(tmp_path))
    record = load_record(out, "t.finetune.a")
    assert record["status"] == "failed" and record["returncode"] == 143
    assert record["reason"] == "exit 143: stopped by SIGTERM at step 3 of 9: checkpoint saved"
    log = open(os.path.join(out, "runs", "t.finetune.a", "log.txt")).read()
    assert log.rstrip().endswith("checkpoint saved")
    assert load_record(out, "t.finetune.b") is None  # nothing started after the stop

    assert run_plan(plan, out, str(tmp_path), echo=False) == {
        "t.finetune.a": "finished", "t.finetune.b": "finished"}
    assert (_calls(tmp_path, "a"), _calls(tmp_path, "b")) == (2, 1)


def test_a_corrupt_record_stops_the_tables_naming_it(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    run_plan(_fake_plan(tmp_path, {"a": "ok", "b": "ok"}), out, str(tmp_path), echo=False)
    path = record_path(out, "t.finetune.b")
    with open(path, "r+") as f:
        f.truncate(len(f.read()) // 2)  # as a full disk or a kill mid-copy leaves it
    done = subprocess.run([sys.executable, "-m", "reproduce.tables", "--output_dir", out],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"^error: {re.escape(path)}:\d+: corrupt record \(not valid JSON",
                     done.stderr, re.M), done.stderr


def _span(tmp_path, name):
    return json.loads((tmp_path / "work" / name / "span.json").read_text())


def test_two_jobs_overlap_and_dependents_wait(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "slow", "b": "ok", "c": "ok"})  # c needs a
    assert set(run_plan(plan, out, str(tmp_path), echo=False, jobs=2).values()) == {"finished"}
    (a_began, a_ended), (b_began, _), (c_began, _) = (_span(tmp_path, n) for n in "abc")
    assert b_began < a_ended  # b ran beside a
    assert c_began >= a_ended  # c waited for the run it needs


def test_two_jobs_start_the_longest_estimate_first(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "ok", "b": "ok", "d": "ok"})
    runs = {k: dataclasses.replace(r, estimate_s=100.0 if k.endswith(".d") else 1.0)
            for k, r in plan.runs.items()}
    plan = dataclasses.replace(plan, runs=runs)
    assert set(run_plan(plan, out, str(tmp_path), echo=False, jobs=2).values()) == {"finished"}
    assert _span(tmp_path, "d")[0] < _span(tmp_path, "b")[0]  # plan order would start b first


def test_pretraining_runs_alone(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "slow", "b": "ok"})
    runs = dict(plan.runs, **{"t.finetune.a": dataclasses.replace(plan.runs["t.finetune.a"],
                                                                  stage="pretrain")})
    plan = dataclasses.replace(plan, runs=runs)
    # (a fails as pretraining, having no export/; b does not need it)
    assert run_plan(plan, out, str(tmp_path), echo=False, jobs=2)["t.finetune.b"] == "finished"
    assert _span(tmp_path, "b")[0] >= _span(tmp_path, "a")[1]


def test_failures_block_dependents_and_changed_commands_restart_clean(fake_cli, tmp_path):
    out = str(tmp_path / "results")
    plan = _fake_plan(tmp_path, {"a": "fail", "c": "ok"})
    final = run_plan(plan, out, str(tmp_path), echo=False)
    assert final == {"t.finetune.a": "failed", "t.finetune.c": "blocked"}
    failed = load_record(out, "t.finetune.a")
    assert "told to fail" in failed["reason"] and failed["returncode"] == 1
    assert "needs t.finetune.a (failed)" in load_record(out, "t.finetune.c")["reason"]

    plan = _fake_plan(tmp_path, {"a": "ok", "c": "ok"})  # the command of "a" changed
    stale = tmp_path / "work" / "a" / "stale-checkpoint"
    stale.write_text("from the old command")
    assert set(run_plan(plan, out, str(tmp_path), echo=False).values()) == {"finished"}
    assert not stale.exists(), "a changed command starts in a clean directory"
    assert [p.name for p in (tmp_path / "work").glob("a.old-*/stale-checkpoint")], \
        "the old outputs are set aside, not deleted"
    # When "a" is redone, "c", which reads its outputs, is redone too, once.
    assert _calls(tmp_path, "c") == 1
    write_record(out, {**load_record(out, "t.finetune.a"), "ended": "later"})
    run_plan(plan, out, str(tmp_path), echo=False)
    assert len(list((tmp_path / "work").glob("c.old-*"))) == 1 and _calls(tmp_path, "c") == 1
    run_plan(plan, out, str(tmp_path), echo=False)
    assert len(list((tmp_path / "work").glob("c.old-*"))) == 1


def test_unavailable_runs_are_recorded_with_their_reason(fake_data, tmp_path):
    out = str(tmp_path / "results")
    plan = _plan("cpu", fake_data, tmp_path).select(["table1"])
    plan.runs = {k: r for k, r in plan.runs.items() if r.unavailable}
    run_plan(plan, out, fake_data, echo=False)
    record = load_record(out, "cpu.finetune.default.qqp")
    assert record["status"] == "unavailable" and record["reason"] == "no QQP data"


def test_records_and_logs_are_portable_and_their_runs_stay_finished(fake_cli, tmp_path):
    """The plan's data directory is $BERT_DATA_DIR in the record, its command and its log
    (results/ is committed), and the plan, compared in that form, finds the run done."""
    data, out = tmp_path / "data", str(tmp_path / "results")
    run = _fake_plan(tmp_path, {"a": "ok"}).runs["t.finetune.a"]
    run = dataclasses.replace(run, args=("--data_dir", str(data / "glue_data"), *run.args))
    plan = Plan("smoke", "cpu", {run.run_id: run}, data_dir=str(data))
    assert run_plan(plan, out, str(data), echo=False) == {run.run_id: "finished"}
    record = load_record(out, run.run_id)
    assert record["argv"][:2] == ["--data_dir", "$BERT_DATA_DIR/glue_data"]
    with open(os.path.join(out, "runs", run.run_id, "log.txt"), encoding="utf-8") as f:
        log = f.read()
    assert "=== " in log and " python -m fake_cli --data_dir $BERT_DATA_DIR/glue_data" in log
    assert str(tmp_path) not in json.dumps(record) + log and sys.executable not in log
    assert run_plan(plan, out, str(data), echo=False) == {run.run_id: "finished"}
    assert _calls(tmp_path, "a") == 1


def test_a_log_line_split_between_reads_is_rewritten_whole(tmp_path):
    from reproduce.runner import _PortableLog
    data = str(tmp_path / "data")
    text = f"read {data}/glue_data/RTE/train.tsv\rbar {data}/x\nlast {data}"
    with open(tmp_path / "log.txt", "wb") as f:
        log = _PortableLog(f, data)
        for start in range(0, len(text), 7):
            log.write(text[start:start + 7].encode())
        log.close()
    assert (tmp_path / "log.txt").read_bytes().decode() == (
        "read $BERT_DATA_DIR/glue_data/RTE/train.tsv\rbar $BERT_DATA_DIR/x\nlast $BERT_DATA_DIR")


def test_dry_run_prints_the_plan_and_writes_nothing(fake_data, tmp_path, capsys):
    out = tmp_path / "results"
    code = harness.main(["--strategy", "cpu", "--scale", "smoke", "--data_dir", fake_data,
                         "--output_dir", str(out), "--work_dir", str(tmp_path / "w"),
                         "--dry_run"])
    text = capsys.readouterr().out
    assert code == 0 and not out.exists() and not (tmp_path / "w").exists()
    assert "Plan: scale smoke" in text and "smoke.pretrain.tiny-nsp" in text
    assert re.search(r"To run: \d+ runs, estimated \d+m", text)
    assert re.search(r"^This machine: float32 matmul peak \d+ GFLOP/s", text, re.M)


# ------------------------------------------------------------------- no data directory
# The tasks tensorflow-datasets has (TaskSpec.tfds_name): GLUE, SQuAD, CoNLL-2003.
TFDS_TASKS = ("mnli", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte", "wnli",
              "squad1.1", "squad2.0", "conll2003")


def test_without_a_data_directory_fine_tuning_is_planned_from_tfds(tmp_path):
    plan = _plan("cpu", str(tmp_path / "absent"), tmp_path, tfds_fallback=True)
    for task in TFDS_TASKS:
        run = plan.runs[f"cpu.finetune.default.{task}"]
        assert run.unavailable is None and run.config.source == "tfds", task
        assert run.args[run.args.index("--source") + 1] == "tfds"
        assert run.info["data_notes"] == [
            f"from tensorflow-datasets ({TASKS[task].tfds_name}): no data directory"]
    # tfds has SQuAD v2.0's train split: no training on v1.1 in its place.
    assert "--train_task" not in plan.runs["cpu.finetune.default.squad2.0"].args
    assert plan.runs["cpu.finetune.default.swag"].unavailable == (
        "no SWAG data (no data directory; not in tfds)")
    # The pretraining corpus has no fallback: every run that needs it is n/a, saying why.
    for run in plan.runs.values():
        if run.stage != "finetune" or run.needs:
            assert run.unavailable == ("no pretraining corpus (no data directory; tfds has "
                                       "fine-tuning data only)"), run.run_id


def test_harness_without_a_data_directory_plans_tfds_but_refuses_a_missing_one(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no ./data here
    monkeypatch.delenv("BERT_DATA_DIR", raising=False)
    argv = ["--strategy", "cpu", "--scale", "cpu", "--output_dir", "out", "--work_dir", "w",
            "--dry_run"]
    assert harness.main(argv) == 0
    captured = capsys.readouterr()
    assert "note: no data directory at ./data" in captured.err
    assert re.search(r"^todo +\S+ +-  +cpu\.finetune\.default\.rte ", captured.out, re.M)
    # A --data_dir that was given and does not exist is an error (it used to plan every
    # run as n/a and exit 0 having run nothing).
    assert harness.main([*argv, "--data_dir", "absent"]) == 2
    assert capsys.readouterr().err.startswith("error: --data_dir absent does not exist; ")


# Every Python process started with this directory on its PYTHONPATH reads tfds's mock
# data instead of downloading. (The context is kept: collected, it would exit.)
MOCK_TFDS_SITECUSTOMIZE = """
import tensorflow_datasets as tfds
MOCK = tfds.testing.mock_data(num_examples=8)
MOCK.__enter__()
"""


@pytest.mark.slow
def test_harness_without_a_data_directory_runs_from_tfds(minilm_dir, tmp_path, monkeypatch):
    """The cpu plan's RTE run of the default checkpoint with nothing set up, end to end:
    the harness runs glue_suite.run in a subprocess, which mock_data in this process
    would not reach, so a sitecustomize module mocks tfds there (~30 s)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(MOCK_TFDS_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)  # no ./data here
    monkeypatch.delenv("BERT_DATA_DIR", raising=False)
    from reproduce import tables
    build_tables, read_gold_from = tables.build_tables, []
    monkeypatch.setattr(tables, "build_tables", lambda output_dir, data_dir: (
        read_gold_from.append(data_dir) or build_tables(output_dir, data_dir)))
    run_id = "cpu.finetune.default.rte"
    assert harness.main(["--strategy", "cpu", "--scale", "cpu", "--runs", run_id,
                         "--output_dir", "out", "--work_dir", "work", "--quiet"]) == 0
    assert read_gold_from == [None]  # as `python -m reproduce.tables` here: no ./data
    record = load_record("out", run_id)
    assert record["status"] == "finished" and "--source" in record["argv"]
    assert record["info"]["data_notes"] == [
        "from tensorflow-datasets (glue/rte): no data directory"]
    assert record["result"]["config"]["source"] == "tfds"
    assert record["result"]["data_files"] == {"train": "tfds:glue/rte[train]",
                                              "dev": "tfds:glue/rte[validation]",
                                              "test": "tfds:glue/rte[test]"}
    assert record["result"]["train_examples"] == 8


# ---------------------------------------------------------------------------- tables
def _record(run_id, status, cells, metrics=None, grid=None, reason=None, info=None,
            stage="finetune", scale="cpu"):
    """A hand-written SYNTHETIC record, in reproduce.records' format."""
    record = {"run_id": run_id, "stage": stage, "scale": scale, "status": status,
              "cells": [vars(c) for c in cells], "tables": sorted({c.table for c in cells}),
              "info": info or {"model": {"size": "tiny", "label": "L2/H128/A2",
                                         "parameters": 4.4e6, "steps": 1500,
                                         "batch_size": 32}},
              "command": f"python -m synthetic {run_id}", "wall_seconds": 60.0,
              "git": {"commit": "0" * 40, "dirty": False},
              "hardware": {"cpu": "synthetic", "cpu_cores": 2, "memory_gib": 1.0,
                           "packages": {"tensorflow": "x"}}}
    if metrics is not None:
        record["metrics"] = metrics
    if grid is not None:
        record["result"] = {"grid": grid}
    if reason:
        record["reason"] = reason
    return record


@pytest.fixture
def synthetic_results(tmp_path):
    out = tmp_path / "results"
    three_seeds = {"best_learning_rate": 1e-4, "degenerate_runs": [2], "by_learning_rate": [
        {"learning_rate": 1e-4, "runs": 3, "mean": {"accuracy": 80.0}, "std": {"accuracy": 2.0}}]}
    records = [
        _record("cpu.finetune.tiny-nsp.mrpc", "finished",
                [Cell("table5", "BERT-BASE", "MRPC", "accuracy"),
                 Cell("table6", "L2/H128/A2", "MRPC", "accuracy")],
                metrics={"accuracy": 82.0}, grid=three_seeds),
        _record("cpu.finetune.tiny-nsp.qnli", "unavailable",
                [Cell("table5", "BERT-BASE", "QNLI", "accuracy")], reason="no QNLI train data"),
        _record("cpu.finetune.tiny-ltr.mrpc", "failed",
                [Cell("table5", "LTR & No NSP", "MRPC", "accuracy")], reason="exit 1: boom"),
        _record("cpu.pretrain.tiny-nsp", "finished",
                [Cell("table6", "L2/H128/A2", "LM ppl", "mlm_perplexity")],
                metrics={"mlm_perplexity": 120.5}, stage="pretrain"),
        _record("cpu.finetune.tiny-nsp@500.mnli", "finished",
                [Cell("figure5", "MLM", "500", "accuracy")], metrics={"accuracy": 50.0},
                info={"task": "mnli", "pretrain_step": 500, "model": {"size": "tiny"}}),
        _record("cpu.finetune.tiny-nsp.mnli", "finished",
                [Cell("figure5", "MLM", "1500", "accuracy")], metrics={"accuracy": 55.0},
                info={"task": "mnli", "pretrain_step": 1500, "model": {"size": "tiny"}}),
    ]
    for record in records:
        write_record(str(out), record)
    return out


def test_tables_show_ours_paper_diff_and_na(synthetic_results):
    written = tables.build_tables(str(synthetic_results))
    assert {"table5.md", "table5.csv", "table6.png", "figure5.png", "pretraining.md",
            "runs.md"} <= set(written)
    table5 = (synthetic_results / "tables" / "table5.md").read_text()
    # Ours = mean +- std over the restarts at the chosen learning rate; paper 86.7.
    assert "80.0 ± 2.0 (n=3) [1 degenerate: constant predictions] / 86.7 (-6.7)" in table5
    assert "n/a (no QNLI train data) / 88.4" in table5
    assert "n/a (run failed: exit 1: boom) / 77.5" in table5
    assert "n/a (not run) / 84.4" in table5  # MNLI-m: no record at all
    assert "| No NSP | – | – / 83.9 |" in table5  # a row with no run at this scale
    table6 = (synthetic_results / "tables" / "table6.md").read_text()
    assert "120.50 / –" in table6
    assert "80.0 ± 2.0 (n=3) [1 degenerate: constant predictions] / 71.1† (+8.9)" in table6  # Turc et al. Tiny MRPC accuracy
    csv = pd.read_csv(synthetic_results / "tables" / "table5.csv")
    row = csv[(csv["row"] == "BERT-BASE") & (csv["column"] == "MRPC")].iloc[0]
    assert (row["ours"], row["std"], row["seeds"], row["best_run"], row["paper"]) == (
        80.0, 2.0, 3, 82.0, 86.7)
    assert math.isclose(row["diff"], -6.7)
    na = csv[csv["column"] == "QNLI"].iloc[0]
    assert na["status"] == "unavailable" and math.isnan(na["ours"])
    figure5 = (synthetic_results / "tables" / "figure5.md").read_text()
    assert "| MLM |" in figure5 and "50.0" in figure5 and "55.0" in figure5


def test_a_models_label_says_how_it_was_pretrained():
    model = {"size": "tiny", "label": "L2/H128/A2", "parameters": 4.4e6, "steps": 15000,
             "batch_size": 64}
    base = "tiny L2/H128/A2 (4.4M), 15000 steps x 64"
    assert tables._model_label({"model": model}) == base  # records from before the field
    assert tables._model_label({"model": {**model, "dropout": None}}) == base  # the size's
    assert tables._model_label({"model": {**model, "dropout": 0.0}}) == base + ", no dropout"
    assert tables._model_label({"model": {**model, "dropout": 0.05}}) == base + ", dropout 0.05"
    # A size named by its shape is not said twice.
    assert tables._model_label({"model": {**model, "size": "L4_H128_A2", "label": "L4/H128/A2",
                                          "parameters": 4.8e6}}) == \
        "L4/H128/A2 (4.8M), 15000 steps x 64"


def test_the_pretraining_table_says_which_runs_reached_the_recipes_accuracy():
    model = {"size": "tiny", "label": "L2/H128/A2", "steps": 22000, "batch_size": 64}
    records = [
        {"run_id": "pre.mask0-0-100", "stage": "pretrain", "status": "finished",
         "info": {"model": {**model, "objective": "nsp", "mask_rates": [0.0, 0.0, 1.0]}},
         "result": {"step": 22000, "mlm_accuracy": 0.101, "mlm_hidden_accuracy": 0.107,
                    "mlm_perplexity": 741.8, "nsp_accuracy": 0.83}},
        {"run_id": "pre.ltr", "stage": "pretrain", "status": "finished",
         "info": {"model": {**model, "objective": "ltr", "mask_rates": [0.8, 0.1, 0.1]}},
         "result": {"step": 15000, "mlm_accuracy": 0.3, "mlm_hidden_accuracy": 0.3,
                    "mlm_perplexity": 90.0}},
        {"run_id": "pre.running", "stage": "pretrain", "status": "running",
         "info": {"model": {**model, "objective": "nsp", "mask_rates": [0.8, 0.1, 0.1]}}},
        {"run_id": "ft", "stage": "finetune", "status": "finished", "info": {"model": model},
         "result": {"accuracy": 80.0}}]
    frame = tables.pretraining_frame(records)
    assert frame["run_id"].tolist() == ["pre.mask0-0-100", "pre.ltr", "pre.running"]
    assert frame["masks"].tolist() == ["0/0/100", "", "80/10/10"]  # LTR masks nothing
    assert frame["sequences"].tolist() == [22000 * 64, 15000 * 64, 22000 * 64]
    assert frame["reaches_target"].tolist() == [False, True, None]  # 30% itself reaches it
    lines = tables._pretraining_markdown(frame).splitlines()
    assert ("| pre.mask0-0-100 | finished | tiny L2/H128/A2, 22000 steps x 64 | nsp | 0/0/100 "
            "| 1,408,000 | 10.1% | 10.7% | 742 | 83.0% | no |") in lines
    assert ("| pre.ltr | finished | tiny L2/H128/A2, 22000 steps x 64 | ltr |  | 960,000 "
            "| 30.0% | 30.0% | 90 |  | yes |") in lines
    assert ("| pre.running | running | tiny L2/H128/A2, 22000 steps x 64 | nsp | 80/10/10 "
            "| 1,408,000 |  |  |  |  |  |") in lines


def test_tables_leave_out_runs_whose_pretraining_was_redone(tmp_path):
    pretrain = _record("cpu.pretrain.tiny-nsp", "finished",
                       [Cell("table6", "L2/H128/A2", "LM ppl", "mlm_perplexity")],
                       metrics={"mlm_perplexity": 120.5}, stage="pretrain")
    pretrain["ended"] = "2026-11-27T02:00:00+00:00"  # rerun: the fine-tunes below read 01:00's
    fine_tunes = [
        _record("cpu.finetune.tiny-nsp.mrpc", "finished",
                [Cell("table5", "BERT-BASE", "MRPC", "accuracy")], metrics={"accuracy": 82.0}),
        _record("cpu.finetune.tiny-nsp.sst2", "finished",
                [Cell("table5", "BERT-BASE", "SST-2", "accuracy")], metrics={"accuracy": 81.0})]
    fine_tunes[0]["needs_ended"] = {"cpu.pretrain.tiny-nsp": "2026-11-27T01:00:00+00:00"}
    fine_tunes[0]["info"]["model"] = {**fine_tunes[0]["info"]["model"], "steps": 1000}
    fine_tunes[1]["needs_ended"] = {"cpu.pretrain.tiny-nsp": pretrain["ended"]}
    for record in (pretrain, *fine_tunes):
        write_record(str(tmp_path), record)
    tables.build_tables(str(tmp_path))
    table5 = (tmp_path / "tables" / "table5.md").read_text()
    assert "82.0" not in table5
    assert "n/a (stale: cpu.pretrain.tiny-nsp redone since this run read it) / 86.7" in table5
    assert "81.0 / 92.7" in table5  # read the pretraining run that is there now
    row = next(line for line in table5.splitlines() if line.startswith("| BERT-BASE"))
    assert "1500 steps x 32" in row and "1000 steps" not in row  # the scored run's model
    runs = (tmp_path / "tables" / "runs.md").read_text()
    assert "| cpu.finetune.tiny-nsp.mrpc | stale (cpu.pretrain.tiny-nsp redone since this " \
           "run read it) |" in runs
    assert "| cpu.finetune.tiny-nsp.sst2 | finished |" in runs


def test_tables_with_no_records_are_all_na(tmp_path):
    written = tables.build_tables(str(tmp_path))
    table1 = (tmp_path / "tables" / "table1.md").read_text()
    assert "No runs recorded" in table1 and "table6.png" not in written


# ---------------------------------------------------------------------- paper numbers
def test_paper_numbers_sample():
    assert paper.lookup("table1", "BERT-LARGE", "CoLA").value == 60.5
    assert paper.lookup("table1", "BERT-BASE", "MNLI-mm").value == 83.4
    assert paper.lookup("table2", "BERT-BASE (single)", "Dev F1").value == 88.5
    assert paper.lookup("table3", "BERT-LARGE (single)", "Test EM").value == 80.0
    assert paper.lookup("table5", "+ BiLSTM", "SQuAD F1").value == 84.9
    assert paper.lookup("table6", "L24/H1024/A16", "LM ppl").value == 3.23
    assert paper.lookup("table7", "concat last four hidden", "Dev F1").value == 96.1
    assert paper.lookup("table8", "0/0/100", "NER feature-based").value == 94.6
    assert paper.lookup("table4", "OpenAI GPT", "Dev") is None  # "–" in the paper
    assert paper.lookup("ref:small-berts", "mini", "MNLI-m").value == 74.8


def _markdown_tables(text):
    """{heading: [[cells], ...]} for every '## ...' section's first markdown table."""
    sections, heading = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|") and heading and not set(line) <= set("|- "):
            sections.setdefault(heading, []).append([c.strip() for c in line.strip("|").split("|")])
    return sections


def _values(cell, width=1):
    if cell in ("–", ""):
        return [None] * width  # "–" stands for a whole EM/F1 or m/mm pair
    return [float(v) for v in cell.split("/")]


@pytest.mark.skipif(not os.path.isfile(PAPER_FILE), reason="paper file not present")
def test_paper_numbers_match_the_paper_file():
    """Every cell of Tables 1-8 (and the small-BERT rows), read independently from the
    project's paper file, equals paper_numbers."""
    sections = _markdown_tables(open(PAPER_FILE, encoding="utf-8").read())
    checked = 0
    for table in ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8"):
        heading = next(h for h in sections if h.lower().startswith(f"table {table[-1]}"))
        header, *rows = sections[heading]
        columns = [c.name for c in paper.columns(table)]
        widths = [max(len(r[i].split("/")) for r in rows) for i in range(len(header))]
        for cells in rows:
            label = cells[0]
            if label == "(train size)":
                continue
            if table == "table6":  # rows keyed by L, H, A
                label, cells = f"L{cells[0]}/H{cells[1]}/A{cells[2]}", [None] + cells[3:]
            if table == "table8":  # rows keyed by MASK, SAME, RND
                label = "/".join(c.rstrip("%") for c in cells[:3])
                cells = [None] + cells[3:]
            values = [v for cell, width in zip(cells[1:], widths[1:])
                      for v in _values(cell, width)]
            assert len(values) == len(columns), (table, label)
            for column, value in zip(columns, values):
                number = paper.lookup(table, label, column)
                assert (number.value if number else None) == value, (table, label, column)
                checked += 1
    small = next(rows for h, rows in sections.items() if h.startswith("Reference points"))
    for cells in small[1:]:
        size = cells[0].split()[0].lower()
        values = [v for cell in cells[1:] for v in _values(cell)]
        columns = [c.name for c in paper.SMALL_BERT_COLUMNS]
        assert [paper.lookup("ref:small-berts", size, c).value for c in columns] == values
        checked += len(values)
    assert checked > 200


# --------------------------------------------------------------------- end to end
def _cli_exists(module):
    return subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          timeout=300).returncode == 0


@pytest.mark.slow
def test_smoke_scale_end_to_end(data_dir, tmp_path):
    """The real CLIs on Tiny for a few steps: data -> pretraining -> fine-tuning ->
    tables, then a second pass that reruns nothing."""
    if not all(_cli_exists(m) for m in COMMANDS):
        pytest.skip("the pretraining / fine-tuning CLIs are not all present")
    out, work = str(tmp_path / "results"), str(tmp_path / "work")
    plan = build_plan("smoke", "cpu", data_dir, work, tables=["table6"])
    final = run_plan(plan, out, data_dir, echo=False)
    assert set(final.values()) == {"finished"}, final
    # A fine-tuning record keeps every restart's predictions but no copy of the benchmark's
    # labels: their digest, checked when the intervals read them from the data again.
    mrpc_record = next(load_record(out, k) for k in plan.runs if k.endswith(".mrpc"))
    assert not any(f.startswith("restarts/gold") for f in mrpc_record["outputs"]["files"])
    assert any(f.startswith("restarts/lr") for f in mrpc_record["outputs"]["files"])
    assert not os.path.exists(os.path.join(out, "runs", mrpc_record["run_id"], "files",
                                           "restarts", "gold"))
    assert set(mrpc_record["outputs"]["gold_sha256"]) == {"dev"}
    tables.build_tables(out)  # no data directory: numbers, no intervals, and why
    mrpc = pd.read_csv(os.path.join(out, "tables", "table6.csv")).query("column == 'MRPC'")
    assert math.isnan(mrpc["ci_low"].iloc[0]) and "no data directory" in mrpc["ci_note"].iloc[0]
    tables.build_tables(out, data_dir)
    table6 = pd.read_csv(os.path.join(out, "tables", "table6.csv"))
    # The tables hold what the runs measured: perplexity is exp(held-out MLM loss), at
    # most about the vocabulary's size (an untrained model's near-uniform guess: 30522).
    ppl = table6[table6["column"] == "LM ppl"].iloc[0]
    pretrain = next(load_record(out, k) for k in plan.runs if ".pretrain." in k)
    assert ppl["status"] == "ok"
    assert ppl["ours"] == pytest.approx(math.exp(pretrain["metrics"]["mlm_loss"]), rel=1e-6)
    assert ppl["ours"] < 1.1 * 30522
    # MRPC: the mean accuracy of the 2 restarts at the learning rate picked on dev.
    mrpc = table6[table6["column"] == "MRPC"].iloc[0]
    grid = next(load_record(out, k) for k in plan.runs if k.endswith(".mrpc"))["result"]["grid"]
    picked = [r["metrics"]["accuracy"] for r in grid["runs"]
              if r["learning_rate"] == grid["best_learning_rate"]]
    assert mrpc["status"] == "ok" and mrpc["seeds"] == len(picked) == 2
    assert mrpc["ours"] == pytest.approx(np.mean(picked), rel=1e-9) and 0 < mrpc["ours"] < 100
    assert mrpc["ci_low"] <= mrpc["ours"] <= mrpc["ci_high"]
    before = {k: load_record(out, k)["ended"] for k in plan.runs}
    assert set(run_plan(plan, out, data_dir, echo=False).values()) == {"finished"}
    assert before == {k: load_record(out, k)["ended"] for k in plan.runs}


@pytest.mark.parametrize("flag,env,has_dot_data,expected", [
    (None, None, True, "./data"),  # as reproduce.all and glue_suite.run find it
    (None, None, False, None),  # nothing set up: the cells keep their numbers, no interval
    (None, "from_env", True, "from_env"),
    ("given", "from_env", False, "given"),  # given and missing: its files are named missing
])
def test_tables_find_the_data_directory_as_the_harness_does(
        flag, env, has_dot_data, expected, fake_cli, tmp_path, monkeypatch):
    from reproduce import tables
    run_plan(_fake_plan(tmp_path, {"a": "ok"}), str(tmp_path / "out"), str(tmp_path),
             echo=False)
    monkeypatch.chdir(tmp_path)
    if has_dot_data:
        (tmp_path / "data").mkdir()
    (tmp_path / "from_env").mkdir()
    if env:
        monkeypatch.setenv("BERT_DATA_DIR", env)
    else:
        monkeypatch.delenv("BERT_DATA_DIR", raising=False)
    seen = []
    monkeypatch.setattr(tables, "build_tables",
                        lambda output_dir, data_dir: seen.append(data_dir) or [])
    assert tables.main(["--output_dir", "out"] + (["--data_dir", flag] if flag else [])) == 0
    assert seen == [expected]
