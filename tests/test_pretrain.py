"""The pretraining trainer on tiny synthetic records: learning, replica / accumulation /
steps_per_execution equivalence, kill -9 resumption, two phases, multi-worker.

Tolerances: runs that only regroup the same arithmetic (MirroredStrategy over two
logical CPUs, MultiWorkerMirroredStrategy over two processes, gradient accumulation)
must give the one-device losses to 1e-5 relative and weights to 1e-5 absolute, with
dropout off (dropout masks depend on how the batch is split). Replays of the same
arithmetic (steps_per_execution, a resumed run, with dropout on) must match to 1e-6.
"""

import csv
import dataclasses
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

# MirroredStrategy needs two devices: split the CPU before TensorFlow initialises it.
try:
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
except RuntimeError:  # another test module initialised TensorFlow first
    pass

from bert_tf import distribute  # noqa: E402
from bert_tf.checkpoint_steps import latest_checkpoint_step  # noqa: E402
from bert_tf.checkpoints import read_checkpoint  # noqa: E402
from bert_tf.cli import StopSignals  # noqa: E402
from bert_tf.pretrain import build_parser, main, pretrain  # noqa: E402
from bert_tf.pretrain_config import PretrainConfig  # noqa: E402
from bert_tf.plateau import target_counts, unigram_entropy  # noqa: E402
from bert_tf.pretraining_dataset import instance_to_example, make_pretraining_dataset  # noqa: E402
from bert_tf.pretraining_instances import Instance  # noqa: E402
from bert_tf.pretraining_model import mean_metrics  # noqa: E402
from bert_tf.trainer import Trainer, TrainingStopped  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_SIZE, FIRST_WORD, MASK_ID = 40, 5, 4
T, P, T2, P2 = 32, 5, 64, 10


def write_records(path, num, seq_length, predictions, seed):
    """A task a tiny model learns in a few steps: sentence A repeats one word; B repeats
    it too (next_sentence_label 0) or another word (label 1); masked words are copies.
    Words are Zipf-distributed, so even the unigram is worth learning."""
    rng = np.random.default_rng(seed)
    words = np.arange(FIRST_WORD, VOCAB_SIZE)
    zipf = 1.0 / np.arange(1, len(words) + 1)
    zipf /= zipf.sum()
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num):
            n = int(rng.integers(seq_length // 2, seq_length + 1))
            len_a = (n - 3) // 2
            a, b = rng.choice(words, 2, replace=False, p=zipf)
            is_random = int(rng.random() < 0.5)
            ids = [2] + [a] * len_a + [3] + [b if is_random else a] * (n - 3 - len_a) + [3]
            segments = [0] * (len_a + 2) + [1] * (n - len_a - 2)
            candidates = [i for i, t in enumerate(ids) if t >= FIRST_WORD]
            positions = sorted(rng.choice(candidates, predictions, replace=False).tolist())
            labels = [int(ids[p]) for p in positions]
            for p in positions:
                ids[p] = MASK_ID
            instance = Instance([int(t) for t in ids], segments, positions, labels, is_random)
            writer.write(instance_to_example(instance, seq_length, predictions)
                         .SerializeToString())


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain_data")
    with open(root / "vocab.txt", "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                          [f"w{i}" for i in range(VOCAB_SIZE - FIRST_WORD)]) + "\n")
    for i in range(2):
        write_records(str(root / f"train-{i}.tfrecord"), 200, T, P, seed=i)
    write_records(str(root / "eval.tfrecord"), 64, T, P, seed=10)
    write_records(str(root / "phase2.tfrecord"), 64, T2, P2, seed=20)
    return root


def make_config(data, model_dir, **overrides):
    values = dict(model_size="tiny", objective="nsp", train_files=f"{data}/train-*",
                  vocab_file=f"{data}/vocab.txt", model_dir=str(model_dir),
                  global_batch_size=16, num_train_steps=6, num_warmup_steps=2,
                  max_seq_length=T, max_predictions_per_seq=P, learning_rate=2e-3,
                  save_checkpoints_steps=100, log_every=1, seed=3, dropout=0.0)
    values.update(overrides)
    return PretrainConfig(**values)


def cli_args(config):
    """The command line of a PretrainConfig."""
    args = ["--config", config.model_size, "--objective", config.objective]
    for name in ("train_files", "vocab_file", "model_dir", "global_batch_size",
                 "num_train_steps", "num_warmup_steps", "max_seq_length",
                 "max_predictions_per_seq", "learning_rate", "save_checkpoints_steps",
                 "keep_checkpoints", "log_every", "seed", "eval_files", "eval_steps",
                 "eval_every", "dropout", "plateau_check_steps"):
        value = getattr(config, name)
        if value is not None:
            args += [f"--{name}", str(value)]
    return args


def train_losses(model_dir):
    with open(os.path.join(model_dir, "metrics.csv")) as f:
        return np.array([float(r["loss"]) for r in csv.DictReader(f) if r["split"] == "train"])


def run(config, strategy=None):
    """Trains in this process; returns (per-log-interval losses, weights, trainer)."""
    trainer = Trainer(config, strategy or tf.distribute.OneDeviceStrategy("/cpu:0"))
    trainer.train(log=lambda line: None)
    weights = {v.path.split("/", 1)[1]: v.numpy() for v in trainer.model.trainable_variables}
    return train_losses(config.model_dir), weights, trainer


def assert_same_weights(a, b, atol):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=atol, err_msg=name)


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """6 steps on one device, dropout off, loss logged every step."""
    return run(make_config(data, tmp_path_factory.mktemp("reference")))


# ------------------------------------------------------------------------- learning, outputs
@pytest.fixture(scope="module")
def full_run(data, tmp_path_factory):
    """30 steps with dropout, evaluation and checkpoints: the kill -9 test's reference."""
    config = make_config(data, tmp_path_factory.mktemp("full_run"), num_train_steps=30,
                         num_warmup_steps=3, learning_rate=5e-3, dropout=None, log_every=5,
                         save_checkpoints_steps=5, keep_checkpoints=3,
                         eval_files=f"{data}/eval.tfrecord", eval_steps=2, eval_every=10,
                         plateau_check_steps=20)
    final = pretrain(config, tf.distribute.OneDeviceStrategy("/cpu:0"), command="test",
                     log=lambda line: None)
    return config, final


def test_training_learns_and_writes_metrics_tensorboard_and_export(full_run):
    config, final = full_run
    with open(os.path.join(config.model_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    train = [r for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    assert [int(r["step"]) for r in train] == [5, 10, 15, 20, 25, 30]
    assert [int(r["step"]) for r in evals] == [10, 20, 30]
    losses = [float(r["loss"]) for r in train]
    assert losses[-1] < losses[0] - 0.5, losses  # ~5.4 -> ~3 on this easy task
    assert float(evals[-1]["mlm_perplexity"]) < float(evals[0]["mlm_perplexity"])
    for r in train:
        assert float(r["examples_per_second"]) > 0 and r["learning_rate"] and r["nsp_accuracy"]
    assert float(train[-1]["learning_rate"]) == 0.0  # linear decay reaches 0 at the end

    # Table 6's held-out perplexity = exp(mean masked-LM loss).
    np.testing.assert_allclose(final["mlm_perplexity"], np.exp(final["mlm_loss"]), rtol=1e-9)
    with open(os.path.join(config.model_dir, "eval_results.json")) as f:
        assert json.load(f)["step"] == 30
    # Each held-out sequence's loss terms add up to the final metrics.
    with open(os.path.join(config.model_dir, "heldout_losses.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [int(r["index"]) for r in rows] == list(range(2 * 16))  # eval_steps x batch
    loss, count = (np.array([float(r[k]) for r in rows]) for k in ("mlm_loss", "mlm_count"))
    assert set(count) <= set(range(1, P + 1))
    np.testing.assert_allclose(np.exp(loss.sum() / count.sum()), final["mlm_perplexity"],
                               rtol=1e-5)
    np.testing.assert_allclose(np.mean([float(r["nsp_correct"]) for r in rows]),
                               final["nsp_accuracy"], rtol=1e-6)
    with open(os.path.join(config.model_dir, "pretrain_config.json")) as f:
        written = json.load(f)
    assert written["command"] == "test" and written["bert_config"]["vocab_size"] == VOCAB_SIZE

    scalars = set()
    for event_file in glob.glob(os.path.join(config.model_dir, "tensorboard", "train", "*")):
        for event in tf.compat.v1.train.summary_iterator(event_file):
            scalars |= {value.tag for value in event.summary.value}
    assert {"mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy", "learning_rate",
            "examples_per_second"} <= scalars

    # The export is our checkpoint format, heads included, loadable for fine-tuning.
    checkpoint = read_checkpoint(os.path.join(config.model_dir, "export"), heads=True)
    assert checkpoint.format == "ours" and checkpoint.config.vocab_size == VOCAB_SIZE
    assert "mlm.output_bias" in checkpoint.weights and "nsp.dense.kernel" in checkpoint.weights
    assert len(glob.glob(os.path.join(config.model_dir, "checkpoints", "ckpt-*.index"))) == 3


def records_target_counts(files, objective):
    """How often each id is an LM target the input hides (masked LM: not the token at
    the target's position), read from the records with tf.train.Example."""
    counts = np.zeros(VOCAB_SIZE)
    for path in files:
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            f = tf.train.Example.FromString(record).features.feature
            if objective == "ltr":
                ids, mask = f["input_ids"].int64_list.value, f["input_mask"].int64_list.value
                targets = [t for t, m in zip(ids[1:], mask[1:]) if m]
            else:
                ids = f["input_ids"].int64_list.value
                targets = [t for t, p, w in zip(f["masked_lm_ids"].int64_list.value,
                                                f["masked_lm_positions"].int64_list.value,
                                                f["masked_lm_weights"].float_list.value)
                           if w and ids[p] != t]
            np.add.at(counts, targets, 1)
    return counts


def records_unigram_entropy(files, objective):
    """scipy's entropy of the LM targets the input hides."""
    return scipy.stats.entropy(records_target_counts(files, objective))


@pytest.mark.parametrize("objective", ["nsp", "ltr"])
def test_unigram_entropy_of_the_records(data, objective):
    files = sorted(glob.glob(f"{data}/train-*"))
    batches = make_pretraining_dataset(",".join(files), 8, T, P, is_training=False)
    entropy = unigram_entropy(target_counts(batches, objective, VOCAB_SIZE))
    # 400 records in batches of 8: drop_remainder drops none.
    np.testing.assert_allclose(entropy, records_unigram_entropy(files, objective), rtol=1e-9)


@pytest.mark.parametrize("objective", ["nsp", "ltr"])
def test_output_bias_starts_at_the_log_frequencies_of_the_targets(data, tmp_path, objective):
    """--output_bias_init unigram: at step 0 the LM head's bias is each id's add-one
    smoothed log frequency among the training records' hidden targets, so the untrained
    model already predicts the unigram plateau: its held-out loss is the cross-entropy of
    the held-out targets under those frequencies, not ln V."""
    counts = records_target_counts(sorted(glob.glob(f"{data}/train-*")), objective)
    log_q = np.log((counts + 1) / (counts.sum() + VOCAB_SIZE))
    config = make_config(data, tmp_path, objective=objective, output_bias_init="unigram",
                         eval_files=f"{data}/eval.tfrecord", eval_steps=0)
    trainer = Trainer(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert trainer.restore() == 0
    np.testing.assert_allclose(trainer.model.mlm.output_bias.numpy(), log_q, rtol=1e-5)

    heldout = records_target_counts([f"{data}/eval.tfrecord"], objective)
    cross_entropy = -(heldout * log_q).sum() / heldout.sum()
    # The random encoder adds logits of std ~0.02 * sqrt(H) = 0.23 to the bias: ~0.03 nats.
    loss = trainer.evaluate()["mlm_loss"]
    assert abs(loss - cross_entropy) < 0.1 < np.log(VOCAB_SIZE) - cross_entropy - 0.1, (
        loss, cross_entropy)


def test_dynamic_masking_scores_masked_heldout_records_on_their_own_masks(data, tmp_path):
    """--dynamic_masking masks the training batches anew, but held-out records that hold
    masks (these have no metadata.json, so they do) are scored on those: the same
    untrained model gets the same held-out metrics with and without it. (Masked anew,
    the records' [MASK] tokens would stay in the input and other tokens be predicted.)"""
    static = make_config(data, tmp_path / "static", eval_files=f"{data}/eval.tfrecord",
                         eval_steps=0)
    dynamic = dataclasses.replace(static, model_dir=str(tmp_path / "dynamic"),
                                  dynamic_masking=True)
    metrics = []
    for config in (static, dynamic):
        trainer = Trainer(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
        assert trainer.restore() == 0
        metrics.append(trainer.evaluate())
    assert metrics[0].keys() == metrics[1].keys()
    for key in metrics[0]:
        np.testing.assert_allclose(metrics[1][key], metrics[0][key], rtol=1e-5, err_msg=key)


def test_a_zero_bias_start_and_beta2_are_the_papers_unless_asked(data, tmp_path):
    """By default the LM head's bias starts at 0 and Adam's beta2 is 0.999 (the paper's);
    --adam_beta2 reaches the optimizer; both flags are checked."""
    default = Trainer(make_config(data, tmp_path / "default"),
                      tf.distribute.OneDeviceStrategy("/cpu:0"))
    default.restore()
    assert not default.model.mlm.output_bias.numpy().any()
    assert float(default.optimizer.beta_2) == 0.999
    config = make_config(data, tmp_path / "roberta", adam_beta2=0.98)
    roberta = Trainer(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert float(roberta.optimizer.beta_2) == 0.98
    args = cli_args(config) + ["--adam_beta2", "0.98", "--output_bias_init", "unigram"]
    parsed = build_parser().parse_args(args)
    assert (parsed.adam_beta2, parsed.output_bias_init) == (0.98, "unigram")
    with pytest.raises(ValueError, match="adam_beta2"):
        make_config(data, tmp_path, adam_beta2=1.0)
    with pytest.raises(ValueError, match="output_bias_init"):
        make_config(data, tmp_path, output_bias_init="log")


def test_a_head_from_the_init_checkpoint_keeps_its_output_bias(full_run, tmp_path):
    """--output_bias_init unigram starts fresh heads only: an --init_checkpoint with an
    MLM head brings its own trained bias."""
    config, _ = full_run
    export = os.path.join(config.model_dir, "export")
    continued = PretrainConfig(None, "nsp", config.train_files, None, str(tmp_path),
                               init_checkpoint=export, output_bias_init="unigram",
                               num_train_steps=2, num_warmup_steps=1, max_seq_length=T,
                               max_predictions_per_seq=P)
    trainer = Trainer(continued, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert trainer.restore() == 0
    np.testing.assert_array_equal(trainer.model.mlm.output_bias.numpy(),
                                  read_checkpoint(export, heads=True).weights["mlm.output_bias"])


def test_plateau_check(full_run, data, tmp_path):
    """A run that learns passes the check; one that cannot (learning rate ~0) is warned
    about in its log and its eval_results.json."""
    config, final = full_run
    entropy = records_unigram_entropy(sorted(glob.glob(f"{data}/train-*")), "nsp")
    with open(os.path.join(config.model_dir, "eval_results.json")) as f:
        learned = json.load(f)
    assert learned["plateau_warning"] is False and learned["plateau_check_step"] == 20
    np.testing.assert_allclose(learned["unigram_entropy"], entropy, rtol=1e-9)  # all 400 read

    lines = []
    stuck = make_config(data, tmp_path, num_train_steps=4, learning_rate=1e-9, log_every=2,
                        plateau_check_steps=3)
    pretrain(stuck, tf.distribute.OneDeviceStrategy("/cpu:0"), log=lines.append)
    with open(tmp_path / "eval_results.json") as f:
        result = json.load(f)
    assert result["plateau_warning"] is True and result["plateau_check_step"] == 4
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1 and "unigram plateau" in warnings[0], lines

    lines = []  # 0: no check
    unchecked = dataclasses.replace(stuck, model_dir=str(tmp_path / "unchecked"),
                                    plateau_check_steps=0)
    pretrain(unchecked, tf.distribute.OneDeviceStrategy("/cpu:0"), log=lines.append)
    with open(tmp_path / "unchecked" / "eval_results.json") as f:
        assert "plateau_warning" not in json.load(f)
    assert not [line for line in lines if line.startswith("WARNING")]


def test_kill_9_resumes_to_the_same_result(full_run, tmp_path):
    """The CLI killed at whatever moment the first mid-run checkpoint appears, then
    restarted, ends with the weights and held-out loss of the uninterrupted run."""
    config, final = full_run
    model_dir = tmp_path / "killed"
    args = [sys.executable, "-m", "bert_tf.pretrain", "--strategy", "cpu",
            *cli_args(dataclasses.replace(config, model_dir=str(model_dir)))]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    state = model_dir / "checkpoints" / "checkpoint"
    # A generous deadline: on a loaded machine start-up alone can take minutes, and a kill
    # before the first checkpoint would test a fresh start, not a resume.
    deadline = time.time() + 900
    checkpointed = lambda: state.exists() and "ckpt-10" in state.read_text()
    while not checkpointed() and time.time() < deadline:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    assert checkpointed(), "no checkpoint at step 10 within the deadline"
    process.wait()
    assert not (model_dir / "export").exists(), "the run finished before it was killed"

    resumed = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at step" in resumed.stdout
    with open(model_dir / "eval_results.json") as f:
        resumed_final = json.load(f)
    for key in ("loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"):
        np.testing.assert_allclose(resumed_final[key], final[key], rtol=1e-6, err_msg=key)
    a = read_checkpoint(os.path.join(config.model_dir, "export"), heads=True).weights
    b = read_checkpoint(str(model_dir / "export"), heads=True).weights
    assert_same_weights(a, b, atol=1e-6)
    np.testing.assert_allclose(train_losses(model_dir), train_losses(config.model_dir),
                               rtol=1e-6)
    with open(model_dir / "metrics.csv") as f:  # the clock runs on across the restart
        elapsed = [float(r["elapsed_seconds"]) for r in csv.DictReader(f)]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0, elapsed


def test_sigterm_checkpoints_the_running_step_and_the_rerun_resumes_exactly(data, reference,
                                                                          tmp_path):
    """SIGTERM after step 4 of 6 (no regular checkpoint before step 100): the trainer
    saves step 4 and stops with the shell's code for SIGTERM; a new trainer on the same
    config resumes there and ends with the uninterrupted run's losses and weights."""
    config = make_config(data, tmp_path)

    def sigterm_at_step_4(line):
        if line.startswith("train step 4/"):
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    trainer = Trainer(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
    with pytest.raises(TrainingStopped) as stopped:
        trainer.train(log=sigterm_at_step_4)
    assert (stopped.value.step, stopped.value.exit_code) == (4, 128 + signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is previous  # the handler is gone again
    assert tf.train.latest_checkpoint(trainer.checkpoint_dir).endswith("ckpt-4")
    assert latest_checkpoint_step(trainer.checkpoint_dir) == 4  # read without TensorFlow
    assert not os.path.exists(tmp_path / "export")

    losses, weights, resumed = run(config)
    assert int(resumed.step.numpy()) == 6
    np.testing.assert_allclose(losses, reference[0], rtol=1e-6)
    assert_same_weights(weights, reference[1], atol=1e-6)


def test_stop_signals_ctrl_c_requests_a_stop_and_a_second_one_stops_at_once():
    previous = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. reproduce.all passing the stop on
        assert (stop.signum, stop.name, stop.exit_code) == (signal.SIGINT, "SIGINT", 130)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs between bytecodes; this one should not end
    assert signal.getsignal(signal.SIGINT) is previous
    with StopSignals(enabled=False) as stop:  # e.g. MultiWorker: the usual effect
        assert signal.getsignal(signal.SIGINT) is previous and stop.signum is None


def test_export_steps_write_intermediate_models_without_changing_the_run(data, reference,
                                                                         tmp_path):
    """--export_steps 2,4 (the CLI, with 3 steps per call, so the loop must stop at 2 and 4
    for them) writes export_2/ and export_4/ beside export/; the run is the reference's."""
    config = make_config(data, tmp_path)
    main([*cli_args(config), "--steps_per_execution", "3", "--export_steps", "4,2"])
    np.testing.assert_allclose(train_losses(tmp_path), reference[0], rtol=1e-6)
    exports = {step: read_checkpoint(str(tmp_path / f"export_{step}"), heads=True)
               for step in (2, 4)}
    final = read_checkpoint(str(tmp_path / "export"), heads=True)
    assert {c.pretraining_seq_length for c in (*exports.values(), final)} == {T}
    exports, final = {step: c.weights for step, c in exports.items()}, final.weights
    assert exports[2].keys() == exports[4].keys() == final.keys()
    for a, b in ((exports[2], exports[4]), (exports[4], final)):
        assert not np.allclose(a["encoder.blocks.0.output_dense.kernel"],
                               b["encoder.blocks.0.output_dense.kernel"])
    np.testing.assert_allclose(final["encoder.blocks.1.output_dense.kernel"],
                               reference[1]["encoder/layer_1/output/kernel"], atol=1e-6)
    with open(tmp_path / "pretrain_config.json") as f:
        assert json.load(f)["export_steps"] == [2, 4]
    # Beside a custom --export_dir; steps outside the run are refused.
    assert make_config(data, "d", export_dir="gs://b/run/final/").step_export_dir(3) == \
        "gs://b/run/export_3"
    with pytest.raises(ValueError, match="export_steps"):
        make_config(data, "d", export_steps=(7,))


def test_init_checkpoint_continues_from_an_export_with_its_heads(full_run, tmp_path):
    """--init_checkpoint (the CLI, no --config or --vocab_file) from the full run's export:
    the first evaluation, at step 0, is that run's final held-out loss (encoder and both
    heads loaded); a rerun resumes its own checkpoint, not the init one."""
    config, final = full_run
    export = os.path.join(config.model_dir, "export")
    args = ["--init_checkpoint", export, "--objective", "nsp", "--train_files",
            config.train_files, "--eval_files", config.eval_files, "--eval_steps", "2",
            "--eval_every", "2", "--model_dir", str(tmp_path), "--global_batch_size", "16",
            "--num_train_steps", "2", "--num_warmup_steps", "1", "--max_seq_length", str(T),
            "--max_predictions_per_seq", str(P), "--save_checkpoints_steps", "2",
            "--log_every", "1"]
    main(args)
    with open(tmp_path / "metrics.csv") as f:
        evals = [r for r in csv.DictReader(f) if r["split"] == "eval"]
    assert [int(r["step"]) for r in evals] == [0, 2]
    for key in ("loss", "mlm_loss", "nsp_loss"):
        np.testing.assert_allclose(float(evals[0][key]), final[key], rtol=1e-4, err_msg=key)
    with open(tmp_path / "pretrain_config.json") as f:
        written = json.load(f)
    source = written["init_checkpoint_source"]
    assert source["path"] == os.path.relpath(export) and source["format"] == "ours"
    assert source["heads"] == ["mlm", "nsp"] and len(source["weights_sha256"]) == 64
    assert written["model_size"] is None and written["bert_config"]["num_hidden_layers"] == 2
    assert read_checkpoint(str(tmp_path / "export")).pretraining_seq_length == T

    config = PretrainConfig(None, "nsp", config.train_files, None, str(tmp_path),
                            init_checkpoint=export, num_train_steps=2, num_warmup_steps=1,
                            max_seq_length=T, max_predictions_per_seq=P)
    resumed = Trainer(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert resumed.restore() == 2
    ours = read_checkpoint(str(tmp_path / "export"), heads=True).weights
    kernel = "encoder.blocks.1.output_dense.kernel"
    np.testing.assert_array_equal(resumed.model.encoder.blocks[1].output_dense.kernel.numpy(),
                                  ours[kernel])
    assert not np.allclose(ours[kernel], read_checkpoint(export, heads=True).weights[kernel])


# ------------------------------------------------------------------------- equivalences
def ran_in_a_fresh_process(test) -> bool:
    """Tests of the Mirrored strategy need two logical CPUs, which only a process whose
    TensorFlow was not yet initialised (by an earlier test module) can configure: there,
    run `test` alone in a new process, and say so (the caller then returns)."""
    if len(tf.config.list_logical_devices("CPU")) >= 2:
        return False
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             f"{__file__}::{test.__name__}"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 passed" in result.stdout, result.stdout[-3000:]  # not skipped
    return True


def test_mirrored_two_cpus_matches_one_device(data, reference, tmp_path):
    if ran_in_a_fresh_process(test_mirrored_two_cpus_matches_one_device):
        return
    strategy = distribute.create_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2
    losses, weights, _ = run(make_config(data, tmp_path), strategy)
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5)
    assert_same_weights(weights, reference[1], atol=1e-5)


def test_gradient_accumulation_matches_the_full_batch(data, reference, tmp_path):
    losses, weights, _ = run(make_config(data, tmp_path, grad_accum_steps=4))  # 4 x 4 rows
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5)
    assert_same_weights(weights, reference[1], atol=1e-5)


def test_steps_per_execution_matches_one_step_per_call(data, reference, tmp_path):
    losses, weights, _ = run(make_config(data, tmp_path, steps_per_execution=3, log_every=3))
    np.testing.assert_allclose(losses, reference[0].reshape(2, 3).mean(axis=1), rtol=1e-5)
    assert_same_weights(weights, reference[1], atol=1e-6)


def test_inputs_have_static_shapes_for_tpu(reference):
    trainer = reference[2]
    for spec in tf.nest.flatten(trainer.iterators[0].element_spec):
        assert spec.shape.is_fully_defined(), spec  # drop_remainder: no ragged last batch


# ------------------------------------------------------------------------- two phases
def test_two_phases_resume_exactly_in_either_phase(data, tmp_path):
    """Steps 1-2 on 32-token records, 3-4 on 64-token ones; restarting from the
    checkpoint at the phase boundary or inside phase 2 replays the same run."""
    def config(name, checkpoint_dir=None):
        return make_config(data, tmp_path / name, num_train_steps=4, num_warmup_steps=1,
                           phase2_train_files=f"{data}/phase2.tfrecord", phase2_seq_length=T2,
                           phase2_max_predictions_per_seq=P2, phase2_fraction=0.5,
                           save_checkpoints_steps=1, keep_checkpoints=10, dropout=None,
                           checkpoint_dir=checkpoint_dir)

    losses, weights, trainer = run(config("full"))
    assert trainer.phase == 2
    # Positions up to T2 are trained once phase 2 has begun; the export says so.
    assert [trainer.config.trained_seq_length(s) for s in (1, 2, 3, 4)] == [T, T, T2, T2]
    assert read_checkpoint(str(tmp_path / "full" / "export")).pretraining_seq_length == T2
    assert trainer.iterators[0].element_spec["input_ids"].shape == (16, T2)
    for step in (2, 3):  # 2: the boundary (phase 2 not begun), 3: inside phase 2
        directory = tmp_path / f"from_{step}"
        directory.mkdir()
        for path in glob.glob(str(tmp_path / "full" / "checkpoints" / f"ckpt-{step}.*")):
            shutil.copy(path, directory)
        (directory / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{step}"\n')
        resumed_losses, resumed_weights, _ = run(config(f"resumed_{step}", str(directory)))
        np.testing.assert_allclose(resumed_losses, losses[step:], rtol=1e-6)
        assert_same_weights(resumed_weights, weights, atol=1e-6)


# ------------------------------------------------------------------------- multi-worker
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(config, num_workers=2):
    """`bert_tf.pretrain --strategy multiworker` in `num_workers` local processes ->
    their outputs."""
    args = [sys.executable, "-m", "bert_tf.pretrain", "--strategy", "multiworker",
            *cli_args(config)]
    if config.checkpoint_dir:
        args += ["--checkpoint_dir", config.checkpoint_dir]
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(num_workers)]
    processes = []
    for index in range(num_workers):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(tf_config))
        processes.append(subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    for p, output in zip(processes, outputs):
        assert p.returncode == 0, output[-3000:]
    return outputs


def test_multiworker_each_worker_reads_its_own_data_checkpoints_it_and_resumes(
        data, tmp_path):
    config = make_config(data, tmp_path / "run", save_checkpoints_steps=3)
    outputs = run_workers(config)
    assert "on 2 replica(s)" in outputs[0] and outputs[1].count("train step") == 0  # chief logs
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(os.listdir(checkpoints)) == [
        "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index",
        "ckpt-6.data-00000-of-00001", "ckpt-6.index",
        "input_pipeline_0", "input_pipeline_1"]  # no worker scratch; a position per worker
    for worker in range(2):
        assert {"ckpt-3.index", "ckpt-6.index"} <= set(
            os.listdir(checkpoints / f"input_pipeline_{worker}"))

    # Each worker reads its own file (train-0, train-1) as 8 rows of the 16: the same
    # losses and weights as one device fed both pipelines' batches one after the other.
    trainer = Trainer(make_config(data, tmp_path / "one"),
                      tf.distribute.OneDeviceStrategy("/cpu:0"))
    trainer.restore()
    pipelines = [make_pretraining_dataset(config.train_files, 8, T, P, True, seed=config.seed,
                                          pipeline=(i, 2)) for i in range(2)]
    both = [iter(tf.data.Dataset.zip(*pipelines).map(
        lambda a, b: {name: tf.concat([a[name], b[name]], 0) for name in a}))]
    expected = [mean_metrics(trainer.run_steps(1, both))["loss"] for _ in range(6)]
    losses = train_losses(tmp_path / "run")
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    exported = read_checkpoint(str(tmp_path / "run" / "export"), heads=True).weights
    np.testing.assert_allclose(exported["encoder.blocks.1.output_dense.kernel"],
                               trainer.model.encoder.blocks[1].output_dense.kernel.numpy(),
                               atol=1e-5)

    # Resumed from step 3 (the chief's checkpoint and each worker's input position), the
    # workers replay steps 4-6.
    resumed = tmp_path / "from_3"
    shutil.copytree(checkpoints, resumed)
    for path in glob.glob(str(resumed / "**" / "ckpt-6.*"), recursive=True):
        os.remove(path)
    for directory in (resumed, *resumed.glob("input_pipeline_*")):
        (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
    run_workers(dataclasses.replace(config, model_dir=str(tmp_path / "resumed"),
                                    checkpoint_dir=str(resumed)))
    np.testing.assert_allclose(train_losses(tmp_path / "resumed"), losses[3:], rtol=1e-6)


# ------------------------------------------------------------------------- other settings
# Mixed precision keeps float32 master weights; only the compute is rounded, so a run must
# follow its float32 twin to within its format's precision: bfloat16 keeps 8 mantissa bits
# (2^-8 = 3.9e-3 a value), float16 11 (4.9e-4). Loss scaling that were not undone, or a
# step skipped for overflow, would be off by far more. (Measured on the 2-core CPU: 7e-5
# and 1e-5 over 6 steps.)
@pytest.mark.parametrize("overrides,rtol", [
    ({"precision": "mixed_bfloat16", "jit_compile": True, "grad_accum_steps": 2}, 1e-2),
    ({"precision": "mixed_float16"}, 1e-3),
], ids=["bf16-xla-accum", "fp16-loss_scale"])
def test_mixed_precision_follows_its_float32_twin(data, tmp_path, overrides, rtol):
    config = make_config(data, tmp_path / "mixed", save_checkpoints_steps=2, **overrides)
    losses, weights, trainer = run(config)
    twin = dataclasses.replace(config, model_dir=str(tmp_path / "float32"),
                               precision="float32", jit_compile=False)
    np.testing.assert_allclose(losses, run(twin)[0], rtol=rtol)
    assert all(np.all(np.isfinite(w)) for w in weights.values())
    assert os.path.exists(tmp_path / "mixed" / "checkpoints" / "ckpt-6.index")


# The other objectives and optimizers (float32) from the start: at initialisation the
# logits are near 0, so the LM loss is ln(vocabulary size) (no NSP term here); after 6
# steps on the toy task it is lower.
@pytest.mark.parametrize("overrides", [
    {"objective": "ltr", "optimizer": "lamb"},
    {"objective": "no_nsp", "dynamic_masking": True, "steps_per_execution": 2},
    {"objective": "ltr", "ltr_predictions": 3},
], ids=["ltr-lamb", "no_nsp-dynamic_masking", "ltr-sampled"])
def test_other_objectives_start_at_ln_vocab_and_learn(data, tmp_path, overrides):
    config = make_config(data, tmp_path, save_checkpoints_steps=2, **overrides)
    losses, weights, trainer = run(config)
    assert len(losses) == 6 and int(trainer.step.numpy()) == 6
    np.testing.assert_allclose(losses[0], np.log(VOCAB_SIZE), rtol=0.02)
    assert losses[-2:].mean() < losses[:2].mean()
    assert all(np.all(np.isfinite(w)) for w in weights.values())
    assert os.path.exists(tmp_path / "checkpoints" / "ckpt-6.index")
    exported = read_checkpoint(str(tmp_path / "export"), heads=True)
    assert exported.config.causal == (config.objective == "ltr")


def test_bad_configurations(capsys):
    with pytest.raises(ValueError, match="divisible by grad_accum_steps"):
        PretrainConfig("tiny", "nsp", "x", "v", "d", global_batch_size=10, grad_accum_steps=4)
    with pytest.raises(ValueError, match=r"^num_warmup_steps must lie in \[0, num_train_steps\]; "
                                         r"got num_warmup_steps=20, num_train_steps=10$"):
        PretrainConfig("tiny", "nsp", "x", "v", "d", num_train_steps=10, num_warmup_steps=20)
    with pytest.raises(ValueError, match="objective"):
        PretrainConfig("tiny", "mlm", "x", "v", "d")
    with pytest.raises(ValueError, match="ltr_predictions"):
        PretrainConfig("tiny", "nsp", "x", "v", "d", ltr_predictions=20)
    with pytest.raises(ValueError, match="ltr_predictions"):  # more than T - 1 positions
        PretrainConfig("tiny", "ltr", "x", "v", "d", max_seq_length=16, ltr_predictions=16)
    # The command line: one error line, exit 2 (as for a bad flag).
    assert main(["--config", "tiny", "--train_files", "x", "--vocab_file", "v",
                 "--model_dir", "d", "--strategy", "tpu"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "--tpu" in error and "\n" not in error
    # The command line is the config's fields, plus the model size and the strategy.
    args = build_parser().parse_args(cli_args(PretrainConfig("tiny", "nsp", "x", "v", "d")))
    assert (args.config, args.objective, args.strategy) == ("tiny", "nsp", "cpu")


def test_batch_must_split_over_replicas_and_micro_batches(data, tmp_path):
    if ran_in_a_fresh_process(test_batch_must_split_over_replicas_and_micro_batches):
        return
    config = make_config(data, tmp_path, global_batch_size=12, grad_accum_steps=4)
    with pytest.raises(ValueError, match="replicas \\(2\\) x grad_accum_steps \\(4\\)"):
        Trainer(config, distribute.create_strategy("mirrored"))
