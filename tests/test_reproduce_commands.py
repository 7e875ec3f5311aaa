"""The harness's command lines (reproduce.commands) against the CLIs they run.

Every command of every scale and strategy must parse with its CLI's own argparse
parser: a flag the harness writes and the CLI lacks fails here, not hours into a run.
"""

import dataclasses
import importlib
import json
import os

import pytest

from reproduce.commands import (COMMANDS, DataCommand, Distribution, FinetuneCommand,
                                STRATEGIES, distribution, to_argv)
from reproduce.experiments import build_plan
from reproduce.plan import Run
from reproduce.runner import executed_argv
from reproduce.scales import SCALES


@pytest.fixture(scope="module")
def parsers():
    """module -> its ArgumentParser (importing the CLIs imports TensorFlow)."""
    return {module: importlib.import_module(module).build_parser() for module in COMMANDS}


@pytest.mark.parametrize("tfds_fallback", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("scale", sorted(SCALES))
def test_every_planned_command_parses_with_its_cli(scale, strategy, tfds_fallback, parsers,
                                                   tmp_path):
    # An empty data directory: every run is planned (as n/a), SQuAD v2.0 with --train_task;
    # or none at all: fine-tuning with --source tfds.
    plan = build_plan(scale, strategy, str(tmp_path / "data"), str(tmp_path / "work"),
                      tpu="local" if strategy == "tpu" else None, tfds_fallback=tfds_fallback)
    assert {run.module for run in plan.runs.values()} == set(COMMANDS)
    for run in plan.runs.values():
        assert run.args == run.config.argv() and run.module == run.config.MODULE
        # A fine-tuning rerun into a directory holding a finished run adds --overwrite.
        argvs = [run.args]
        if run.stage == "finetune":
            assert "--overwrite" not in run.args  # never planned: argv decides "done"
            argvs.append(dataclasses.replace(run.config, overwrite=True).argv())
        for argv in argvs:
            try:
                parsers[run.module].parse_args(list(argv))
            except SystemExit as e:
                pytest.fail(f"{run.run_id}: python -m {run.module} rejects (exit {e.code}):"
                            f"\n{argv}")


def test_strategies_are_bert_tf_distributes():
    from bert_tf import distribute
    assert STRATEGIES == distribute.STRATEGIES


def test_to_argv_writes_fields_in_order_and_leaves_out_unset_ones():
    command = FinetuneCommand(task="rte", data_dir="d", output_dir="o", cache_dir="c",
                              distribution=distribution("tpu", "local", FinetuneCommand.MODULE),
                              seeds=2, learning_rates=(1e-4, 5e-05), head="bilstm")
    assert command.argv() == (
        "--task", "rte", "--data_dir", "d", "--output_dir", "o", "--cache_dir", "c",
        "--strategy", "tpu", "--tpu", "local", "--precision", "mixed_bfloat16",
        "--seeds", "2", "--verbose", "2", "--learning_rates", "0.0001,5e-05",
        "--head", "bilstm")
    # --tpu only with the tpu strategy; a bare flag for True.
    assert to_argv(distribution("gpu", "local", "bert_tf.pretrain")) == (
        "--strategy", "gpu", "--precision", "mixed_float16")
    assert to_argv(Distribution("cpu")) == ("--strategy", "cpu", "--precision", "float32")
    data = DataCommand(input_files=("a", "b"), vocab_file="v", output_dir="o",
                       max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15,
                       dupe_factor=1, short_seq_prob=0.1, random_seed=1,
                       mask_rates=(1.0, 0.0, 0.0), objective="nsp", num_workers=1)
    assert data.argv()[:2] == ("--input_files", "a,b")
    assert data.argv()[-5:] == ("--objective", "nsp", "--num_workers", "1", "--overwrite")
    assert "1.0,0.0,0.0" in data.argv()


def test_a_finetune_rerun_over_a_finished_run_overwrites_it(tmp_path):
    command = FinetuneCommand(task="rte", data_dir="d", output_dir=str(tmp_path), cache_dir="c",
                              distribution=distribution("cpu", None, FinetuneCommand.MODULE),
                              seeds=1)
    run = Run("t.finetune.rte", "finetune", command.MODULE, command.argv(), str(tmp_path),
              config=command)
    assert executed_argv(run) == run.args  # nothing there yet
    (tmp_path / "metrics.json").write_text("{}")
    assert executed_argv(run) == (*run.args, "--overwrite")


def test_cpu_pretraining_runs_in_float32_where_bfloat16_is_emulated(tmp_path, monkeypatch):
    from bert_tf import provenance
    plan = build_plan("cpu", "cpu", str(tmp_path / "data"), str(tmp_path / "work"))
    run = next(r for r in plan.runs.values() if r.stage == "pretrain"
               and r.config.distribution.precision == "mixed_bfloat16")

    def executed_precision(native):
        monkeypatch.setattr(provenance, "native_bfloat16", lambda: native)
        argv = executed_argv(run)
        return argv[argv.index("--precision") + 1]

    assert executed_precision(True) == "mixed_bfloat16"
    assert executed_precision(None) == "mixed_bfloat16"  # flags unknown: as planned
    assert executed_precision(False) == "float32"
    assert executed_argv(run) == tuple("float32" if a == "mixed_bfloat16" else a
                                       for a in run.args)  # nothing else changes
    # A run started in bfloat16 (elsewhere) resumes in it: pretrain refuses another.
    os.makedirs(run.config.model_dir)
    with open(os.path.join(run.config.model_dir, "pretrain_config.json"), "w") as f:
        json.dump({"precision": "mixed_bfloat16"}, f)
    assert executed_precision(False) == "mixed_bfloat16"
