"""Sittings (`reproduce.units`) and what the runner does when a finished run's outputs
are gone (`reproduce.runner.outputs_to_remake`, `restore`): another machine, same records."""

import hashlib
import io
import json
import os
import shutil
from types import SimpleNamespace

import pytest

from reproduce.commands import DataCommand, Distribution, FinetuneCommand
from reproduce.plan import Plan, Run
from reproduce.records import base_record, load_record, write_record
from reproduce.runner import execute, outputs_to_remake, restore, run_plan
from reproduce.cost_model import (CPU_EMULATED_BF16_SLOWDOWN, CPU_FLOAT32_MATMUL_PEAK_GFLOPS,
                                  grid_size)
from reproduce.partial import pretraining_shares_done, shares_done
from reproduce.units import (SITTING_S, Speed, next_units, plan_units, print_units,
                             speed_note, units_to_do, unit_status)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(run_id, stage, needs=(), estimate=600.0, out_dir="out"):
    return Run(run_id, stage, "json.tool", (), out_dir, needs=tuple(needs), estimate_s=estimate)


def toy_plan() -> Plan:
    """Two pretraining runs sharing their data, and seven fine-tunings of the shipped
    checkpoint, each 40 minutes (three fit a sitting)."""
    runs = [_run("s.data.nsp", "data", estimate=60), _run("s.data.heldout", "data", estimate=10),
            _run("s.pretrain.tiny", "pretrain", ["s.data.nsp", "s.data.heldout"], 6000),
            _run("s.finetune.tiny.mrpc", "finetune", ["s.pretrain.tiny"]),
            _run("s.pretrain.mini", "pretrain", ["s.data.nsp", "s.data.heldout"], 6000),
            _run("s.finetune.mini.mrpc", "finetune", ["s.pretrain.mini"])]
    runs += [_run(f"s.finetune.default.t{i}", "finetune", estimate=2400) for i in range(7)]
    return Plan("s", "cpu", {r.run_id: r for r in runs})


def test_units_group_each_pretraining_run_with_its_readers_and_pack_the_rest():
    plan = toy_plan()
    units = plan_units(plan)
    assert [u.run_ids for u in units[:2]] == [
        ["s.data.nsp", "s.data.heldout", "s.pretrain.tiny", "s.finetune.tiny.mrpc"],
        ["s.pretrain.mini", "s.finetune.mini.mrpc"]]  # the shared data goes with the first
    rest = units[2:]
    assert [len(u.run_ids) for u in rest] == [3, 3, 1]
    assert all(u.estimate_s <= SITTING_S for u in rest)
    placed = [k for u in units for k in u.run_ids]
    assert sorted(placed) == sorted(plan.runs)  # every run once


def test_next_units_skip_done_units_and_bring_the_data_they_need():
    plan = toy_plan()
    statuses = {k: "todo" for k in plan.runs}
    for k in ("s.data.nsp", "s.data.heldout", "s.pretrain.tiny", "s.finetune.tiny.mrpc"):
        statuses[k] = "finished"
    units = plan_units(plan)
    assert [unit_status(u, statuses) for u in units[:3]] == ["done", "todo", "todo"]
    statuses["s.pretrain.mini"] = "finished"
    assert unit_status(units[1], statuses) == "partial"
    [(name, nxt)] = next_units(plan, statuses, 1)
    assert name == "mini"
    assert list(nxt.runs) == ["s.data.nsp", "s.data.heldout", "s.pretrain.mini",
                              "s.finetune.mini.mrpc"]
    # Three units, three plans run one after another: the first ends whole (its
    # fine-tuning too) before the shipped checkpoint's parts begin.
    parts = [list(part.runs) for _, part in next_units(plan, statuses, 3)]
    assert parts == [list(nxt.runs), [f"s.finetune.default.t{i}" for i in range(3)],
                     [f"s.finetune.default.t{i}" for i in range(3, 6)]]
    statuses.update({k: "finished" for k in units[1].run_ids + units[2].run_ids})
    # Named as in the whole plan: the shipped checkpoint's second part is "part 2".
    assert [u.name for u in units_to_do(plan, statuses, 1)] == [units[3].name] == [
        "shipped checkpoint, fine-tuning part 2"]


def test_the_units_say_what_the_estimates_mean_on_a_slower_machine():
    plan = toy_plan()
    statuses = {k: "todo" for k in plan.runs}
    out = io.StringIO()
    quarter = Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS / 4)
    print_units(plan, statuses, quarter, out=out)
    total = sum(r.estimate_s for r in plan.runs.values())  # 30,070 s: 8h21
    assert out.getvalue().splitlines()[-1] == speed_note(quarter, total * 4)
    assert "expect ~4.0x the estimated times; what is not done: ~33h25 here" in \
        out.getvalue()
    assert "  tiny (4 runs)  (left: ~7h25 here)  [longer than a sitting here]" in \
        out.getvalue()  # 4 x 6,670 s (1h51 where the estimates were measured)
    # As fast as the calibration machine (within 25%): nothing to scale.
    assert speed_note(Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS * 0.9), total).endswith(
        f"against {CPU_FLOAT32_MATMUL_PEAK_GFLOPS:.0f} where the estimates were measured.")
    assert speed_note(Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS * 2), total / 2).endswith(
        "expect ~0.5x the estimated times; what is not done: ~4h11 here.")


def test_pretraining_on_a_cpu_that_emulates_bfloat16_is_slower_whatever_its_peak():
    speed = Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS, native_bfloat16=False)
    plan = toy_plan()
    assert speed.seconds(plan.runs["s.pretrain.tiny"]) == 6000 / CPU_EMULATED_BF16_SLOWDOWN
    assert speed.seconds(plan.runs["s.finetune.tiny.mrpc"]) == 600  # peaks alike
    assert "(pretraining ~2.0x: this CPU emulates bfloat16)" in speed_note(speed, 1.0)
    assert not Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS, native_bfloat16=True).differs


def test_units_that_fit_a_sitting_here_run_before_those_that_do_not():
    plan = toy_plan()  # tiny and mini: 6,600 s each with their data, 1h50
    plan.runs["s.pretrain.mini"].estimate_s = 4000  # mini: 4,600 s
    statuses = {k: "todo" for k in plan.runs}
    first = [u.name for u in units_to_do(plan, statuses, 3)]
    assert first == ["tiny", "mini", "shipped checkpoint, fine-tuning part 1"]
    # Pretraining at half the rate: tiny needs 3h35 here, mini 2h28; the shipped
    # checkpoint's parts (2h each) are fine-tuning, at the estimates' pace.
    slow = Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS, native_bfloat16=False)
    assert [u.name for u in units_to_do(plan, statuses, 5, slow)] == [
        "mini", "shipped checkpoint, fine-tuning part 1",
        "shipped checkpoint, fine-tuning part 2", "shipped checkpoint, fine-tuning part 3",
        "tiny"]  # the unit that cannot end here comes last, not never
    [(name, part)] = next_units(plan, statuses, 1, slow)
    assert name == "mini" and list(part.runs) == [
        "s.data.nsp", "s.data.heldout", "s.pretrain.mini", "s.finetune.mini.mrpc"]
    # Half the peak as well: only the 40-minute part fits (1h20 here); the rest follow
    # shortest first: mini 2h33, tiny 3h42, the two 2-hour parts 4h00 each.
    slower = Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS / 2, native_bfloat16=False)
    assert [u.name for u in units_to_do(plan, statuses, 5, slower)] == [
        "shipped checkpoint, fine-tuning part 3", "mini", "tiny",
        "shipped checkpoint, fine-tuning part 1", "shipped checkpoint, fine-tuning part 2"]


def test_what_is_left_leaves_out_the_share_of_a_run_done_in_earlier_sittings():
    plan = toy_plan()
    statuses = {k: "finished" for k in plan.runs}
    statuses["s.finetune.default.t6"] = "changed"  # 2,400 s, a third of it kept
    out = io.StringIO()
    print_units(plan, statuses, out=out, shares_done={"s.finetune.default.t6": 1 / 3,
                                                        "s.finetune.default.t5": 1 / 3})
    assert out.getvalue().splitlines()[-1].endswith("1 not done, estimated 27m.")


def _checkpoint_index(checkpoint_dir, steps):
    """The index file tf.train.CheckpointManager writes (as TF 2.20 does: relative names)."""
    os.makedirs(checkpoint_dir)
    lines = [f'model_checkpoint_path: "ckpt-{steps[-1]}"']
    lines += [f'all_model_checkpoint_paths: "ckpt-{s}"' for s in steps]
    with open(os.path.join(checkpoint_dir, "checkpoint"), "w") as f:
        f.write("\n".join(lines + ["last_preserved_timestamp: 1796603099.78"]) + "\n")


def test_a_pretraining_run_stopped_part_way_counts_the_steps_its_checkpoints_hold(tmp_path):
    plan = toy_plan()
    for size in ("tiny", "mini"):
        plan.runs[f"s.pretrain.{size}"].config = SimpleNamespace(
            model_dir=str(tmp_path / size), num_train_steps=22000)
    _checkpoint_index(str(tmp_path / "tiny" / "checkpoints"), [19200, 19800])
    statuses = {k: "todo" for k in plan.runs}
    statuses.update({"s.data.nsp": "finished", "s.data.heldout": "finished",
                     "s.pretrain.tiny": "rerun"})
    shares = pretraining_shares_done(plan, statuses)
    assert shares == {"s.pretrain.tiny": pytest.approx(19800 / 22000)}
    # Its record gone (results/ cleaned), its work dir not: the runner resumes them too;
    # a "changed" run's are set aside: another command's.
    assert pretraining_shares_done(plan, {**statuses, "s.pretrain.tiny": "todo"}) == shares
    assert pretraining_shares_done(plan, {**statuses, "s.pretrain.tiny": "changed"}) == {}
    statuses["s.pretrain.mini"] = "rerun"  # stopped before its first checkpoint
    assert pretraining_shares_done(plan, statuses) == shares
    statuses["s.pretrain.mini"] = "todo"
    # Here pretraining runs at half the rate: tiny's rest, 20 minutes of pretraining and its
    # 10-minute fine-tuning, fits a sitting and goes first; without the checkpoints, 3h30.
    slow = Speed(CPU_FLOAT32_MATMUL_PEAK_GFLOPS, native_bfloat16=False)
    names = [u.name for u in units_to_do(plan, statuses, 2, slow)]
    assert names == ["shipped checkpoint, fine-tuning part 1",
                     "shipped checkpoint, fine-tuning part 2"]
    assert [u.name for u in units_to_do(plan, statuses, 2, slow, shares)] == [
        "tiny", "shipped checkpoint, fine-tuning part 1"]
    out = io.StringIO()
    print_units(plan, statuses, slow, out=out, shares_done=shares)
    assert "tiny (4 runs)  (left: ~30m here)\n" in out.getvalue()


def test_the_share_done_counts_the_restarts_the_estimate_counts():
    command = FinetuneCommand(task="rte", data_dir="d", output_dir="o", cache_dir="c",
                              distribution=Distribution("cpu"), seeds=3,
                              learning_rates=(1e-4, 3e-4))
    plan = Plan("s", "cpu", {"s.rte": Run("s.rte", "finetune", command.MODULE,
                                          command.argv(), "o", config=command),
                             "s.data": _run("s.data", "data")})
    kept = {"s.rte": ["lr0.0001-seed0", "lr0.0003-seed0"], "s.data": ["x"]}
    assert shares_done(plan, kept) == {"s.rte": 2 / 6}  # a data run keeps no restarts


@pytest.mark.parametrize("task, size, grid", [
    ("rte", "base", 4),    # the paper's grid, 5e-5 .. 2e-5
    ("rte", "tiny", 3),    # the small-BERT grid glue_suite.run picks below Base
    ("rte", None, 3),      # the shipped checkpoint (MiniLM, H=384) is small too
    ("squad1.1", "base", 1)])  # one fixed rate
def test_a_command_without_rates_is_counted_on_the_grid_glue_suite_picks(task, size, grid):
    command = FinetuneCommand(task=task, data_dir="d", output_dir="o", cache_dir="c",
                              distribution=Distribution("cpu"), seeds=2)
    plan = Plan("s", "cpu", {"s.t": Run("s.t", "finetune", command.MODULE, command.argv(),
                                        "o", config=command, info={"model": {"size": size}})})
    assert grid_size(command, size) == 2 * grid
    assert shares_done(plan, {"s.t": ["lr5e-05-seed0"]}) == {"s.t": 1 / (2 * grid)}


def test_missing_outputs_of_finished_runs_are_remade_where_an_unfinished_run_reads_them(
        tmp_path):
    """A finished pretraining run without its export is rerun (and its data restored) if a
    run that reads it is not finished; nothing is remade for runs nobody needs now."""
    plan = toy_plan()
    out = {k: str(tmp_path / "work" / k) for k in plan.runs}
    for run in plan.runs.values():
        run.out_dir = out[run.run_id]
    output_dir = str(tmp_path / "results")
    for run_id in ("s.data.nsp", "s.data.heldout", "s.pretrain.tiny", "s.finetune.tiny.mrpc",
                   "s.pretrain.mini"):
        write_record(output_dir, {**base_record(plan.runs[run_id], plan), "status": "finished",
                                  "ended": "t0", "needs_ended": {}})
    assert outputs_to_remake(plan, output_dir) == {
        "s.pretrain.mini": "rerun", "s.data.nsp": "restore", "s.data.heldout": "restore"}
    os.makedirs(os.path.join(out["s.pretrain.mini"], "export"))
    assert outputs_to_remake(plan, output_dir) == {}  # tiny's unit is done: left alone


def _hashes(directory):
    return {name: hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(directory)) if name.endswith(".tfrecord")}


def test_restore_remakes_the_same_shards_and_keeps_the_record(tmp_path):
    data = os.environ.get("BERT_DATA_DIR", os.path.join(REPO, "..", "shared", "data"))
    vocab = os.path.join(data, "bert_vocab", "bert-base-uncased", "vocab.txt")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(
        " ".join(f"sentence {d} {i} of the tiny corpus, with words." for i in range(12))
        for d in range(8)) + "\n")
    if not os.path.exists(vocab):  # any vocabulary will do: make one from the corpus
        vocab = str(tmp_path / "vocab.txt")
        words = sorted(set(corpus.read_text().replace(",", " ,").replace(".", " .").split()))
        open(vocab, "w").write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words))
    command = DataCommand(input_files=(str(corpus),), vocab_file=vocab,
                          output_dir=str(tmp_path / "work" / "data"), max_seq_length=32,
                          max_predictions_per_seq=5, masked_lm_prob=0.15, dupe_factor=2,
                          short_seq_prob=0.1, random_seed=1, mask_rates=(0.8, 0.1, 0.1),
                          objective="nsp", num_workers=1)
    run = Run("s.data.toy", "data", command.MODULE, command.argv(), command.output_dir,
              config=command)
    plan = Plan("s", "cpu", {run.run_id: run})
    output_dir = str(tmp_path / "results")
    cwd = os.getcwd()
    os.chdir(REPO)  # python -m bert_tf... from the repository
    try:
        assert execute(run, plan, output_dir, data, echo=False)["status"] == "finished"
        record = load_record(output_dir, run.run_id)
        shards = _hashes(command.output_dir)
        with open(os.path.join(command.output_dir, "metadata.json")) as f:
            metadata = json.load(f)
        shutil.rmtree(command.output_dir)  # another machine: the records, not the shards

        assert restore(run, plan, output_dir, data, echo=False) == "finished"
        assert load_record(output_dir, run.run_id) == record  # untouched: ended, metrics
        assert _hashes(command.output_dir) == shards  # the same bytes
        with open(os.path.join(command.output_dir, "metadata.json")) as f:
            remade = json.load(f)
        assert remade["num_instances"] == metadata["num_instances"] > 0
        assert remade["shards"] == metadata["shards"]

        # A plan whose only run is finished and whose outputs exist remakes nothing.
        assert run_plan(plan, output_dir, data, echo=False) == {run.run_id: "finished"}
    finally:
        os.chdir(cwd)
