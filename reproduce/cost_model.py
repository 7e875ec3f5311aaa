"""Estimated seconds of each run of a plan, from FLOPs and measured throughput.

Training throughput was measured on this project's 2-core CPU machine: a fine-tuning
step costs a fixed part plus its FLOPs at the model's rate (`CPU_FINETUNE`, fitted to the
plan's own runs by `reproduce.calibration`), each task counted at its typical bucketed
length (`BUCKETED_TOKENS`); other models are interpolated between the measured ones.
For TPUs the paper's own training time is the anchor. Other strategies have no
measurement: their estimates are None ("?" in the printed plan).

The planner (`reproduce.plan`) asks for one estimate per run: `data_seconds`,
`pretrain_seconds` (from the pretraining command itself) and `finetune_seconds`.
"""

import dataclasses
import math
from typing import NamedTuple, Optional

from bert_tf import provenance
from glue_suite.tasks import MULTIPLE_CHOICE, TaskSizes, default_learning_rates, get_task
from reproduce.commands import FinetuneCommand, PretrainCommand
from reproduce.models import parameters, shape


class StepCost(NamedTuple):
    """A fine-tuning step on this CPU: `fixed_s` (the optimizer's update of every weight,
    the 30,522-row embedding table included, and the step's dispatch), then the batch's
    training FLOPs at `gflops` GFLOP/s."""
    fixed_s: float
    gflops: float


# Fine-tuning in float32 at batch 32 on the 2-core AMD EPYC with AVX-512 BF16, 2026-11-28:
# Tiny and the shipped MiniLM (None) fitted to the cpu plan's runs of several tasks, hence
# lengths (`python -m reproduce.calibration`; printed in results/glue_suite/
# calibration.txt with each run's fitted step beside its own). BERT-Base from its training
# step alone (bert_tf.benchmark --size base --mode train --precision float32: 5.73
# examples/s at 128 tokens, results/benchmark/run9_idle_float32_8rounds.txt): its fixed part
# MiniLM's in proportion to the weights, its GFLOP/s the rest of the step. Other models:
# the GFLOP/s interpolated log-log by FLOPs per example between these, the fixed part in
# proportion to the weights from the nearest. Larger models run at a higher FLOP/s; in
# short steps the fixed part dominates (Tiny's SST-2 step: 17 ms, 12 of them fixed).
CPU_FINETUNE = {"tiny": StepCost(0.0117, 171.0), None: StepCost(0.0265, 292.0),
                "base": StepCost(0.128, 393.0)}
# Pretraining examples/s of bert_tf.pretrain on the AVX-512 BF16 EPYC, 2026-11-28 (128
# tokens, 20 predictions, batch 64; the masked-LM head's vocabulary matmul makes these runs
# more efficient per FLOP than fine-tuning), by bert_tf.pretrain_benchmark: Tiny
# results/benchmark/pretrain_tiny_avx512_run5.txt (the plan's Tiny runs of that day
# logged 300-306), Mini results/benchmark/pretrain_mini_avx512.txt. bfloat16 gains more
# on the larger model (1.08x against 1.30x).
CPU_PRETRAIN_EXAMPLES_PER_S = {"mixed_bfloat16": {"tiny": 321.0, "mini": 95.0},
                               "float32": {"tiny": 297.0, "mini": 73.0}}
# On a 2-core EPYC with AVX2 alone (2026-11-27, results/benchmark/pretrain_tiny_avx2.txt)
# Tiny pretrained at 80 examples/s in float32 (58 in bfloat16, emulated), 0.5x what the
# AVX-512 machine did with the code of that day (160). The printed plan says so on such a
# CPU; its estimates stay the AVX-512 machine's, so that a plan reads the same anywhere.
CPU_EMULATED_BF16_SLOWDOWN = 0.5
# The float32 matmul peak of the machine these rates were measured on (bert_tf.benchmark's
# 2048^3 matmul: 449 and 461 GFLOP/s, results/benchmark/run7_ and run9_idle_float32_8rounds
# .txt). Hosts of the same name differ by more than their instruction sets: a 2-core AVX2
# EPYC of 2026-11-28 gave 81-121, and MiniLM's fine-tuning step at 128 tokens took 4.0-4.3
# s there (results/benchmark/step_by_length_avx2.txt) against 0.97 s by CPU_FINETUNE, 4.1-4.4x,
# where the peaks differ 3.8-5.6x. The printed units scale by the ratio of this machine's
# peak to it (`reproduce.units.speed_note`).
CPU_FLOAT32_MATMUL_PEAK_GFLOPS = 455.0
# Fine-tuning cuts each batch to its longest row (glue_suite.batching), so a task costs
# its typical length, not its max_seq_length: tokens per training example in one bucketed
# epoch, each batch counted at its longest row, of the train splits featurized with the
# uncased vocabulary (`python -m reproduce.bucketed_tokens`, output in
# results/glue_suite/bucketed_tokens.txt, 2026-11-28; SQuAD v2.0 trains on v1.1 here).
# CoNLL-2003 packs document context around each sentence. Tasks without training data
# here (QQP, QNLI, SWAG) count at their max_seq_length.
BUCKETED_TOKENS = {"cola": 12, "sst2": 14, "stsb": 28, "mrpc": 54, "rte": 67, "wnli": 40,
                   "mnli": 41, "squad1.1": 174, "squad2.0": 174, "conll2003": 125}
# Feature-based NER's BiLSTM reads each sentence's own pieces, not its document context:
# 17.0 per CoNLL-2003 train sentence (the first 5,000), 20.6 as batched (length-sorted,
# rounded up to 8). Its frozen encoder pass (with the context) runs once per model and
# rows: every layer is cached, and the model's other feature-based runs read them.
NER_SENTENCE_TOKENS = 20.6
# 2-layer BiLSTM training, measured alone (2026-11-26): 128 units over MiniLM's four
# concatenated layers (1,536 features), 5,000 CoNLL-2003 sentences of batch 32 in
# 20.8 s of train steps, i.e. 240 sentences/s at NER_SENTENCE_TOKENS = 62 GFLOP/s.
CPU_LSTM_GFLOPS = 62.0
# The paper's TPU time: BERT-Base, 1M steps x 256 (90% at 128 tokens, 10% at 512) in 4
# days on 4 Cloud TPUs (16 chips) -> 741 examples/s at ~93 GFLOP each.
_TPU_BASE_EXAMPLES_PER_S = 1e6 * 256 / (4 * 86400)
CPU_DATA_BYTES_PER_S = 1.3e6   # create_pretraining_data, one worker, measured here
DATA_STARTUP_S = 15.0          # create_pretraining_data: vocabulary, worker processes
STARTUP_S = 30.0               # TensorFlow import, model build, featurization cache


# ------------------------------------------------------------------------------ FLOPs
def encoder_flops(size: Optional[str], seq: int, train: bool = True) -> float:
    """FLOPs of one sequence through the encoder: 12 H^2 weights per token and layer
    (QKV, output, FFN 4H), 2 T^2 H attention per layer; backward = 2 x forward."""
    layers, hidden, _ = shape(size)
    forward = 2 * seq * layers * 12 * hidden ** 2 + 4 * layers * seq ** 2 * hidden
    return 3 * forward if train else forward


def lm_head_flops(size: Optional[str], positions: int, vocab: int = 30522) -> float:
    """Training FLOPs of the MLM / LTR head (transform H x H, tied decoder H x V)."""
    _, hidden, _ = shape(size)
    return 6 * positions * (hidden ** 2 + hidden * vocab)


def bilstm_flops(features: int, units: int, seq: int, train: bool = True) -> float:
    """Two bidirectional LSTM layers over [T, features]: 4 gates x (input + recurrent)."""
    forward = 2 * seq * 2 * 4 * units * ((features + units) + (2 * units + units))
    return 3 * forward if train else forward


# ------------------------------------------------------------------------- throughput
def _anchor_gflops() -> list:
    """(training FLOPs of a 128-token example, GFLOP/s) of each measured model."""
    return sorted((encoder_flops(size, 128), cost.gflops) for size, cost in CPU_FINETUNE.items())


def _interpolated(points: list, flops: float) -> float:
    """GFLOP/s at `flops` per item, log-log between (flops, GFLOP/s) anchors, held
    constant beyond them."""
    if flops <= points[0][0]:
        return points[0][1]
    for (f0, g0), (f1, g1) in zip(points, points[1:]):
        if flops <= f1:
            t = math.log(flops / f0) / math.log(f1 / f0)
            return math.exp(math.log(g0) + t * (math.log(g1) - math.log(g0)))
    return points[-1][1]


def cpu_pretrain_gflops(flops: float, precision: str) -> float:
    """GFLOP/s of pretraining sequences of `flops` each on this project's CPU."""
    rates = CPU_PRETRAIN_EXAMPLES_PER_S[
        "mixed_bfloat16" if precision == "mixed_bfloat16" else "float32"]
    points = sorted((f, rate * f / 1e9) for f, rate in (
        (pretrain_flops(size, "nsp", 128, 20), rate) for size, rate in rates.items()))
    return _interpolated(points, flops)


def achieved_gflops(strategy: str, flops: float) -> Optional[float]:
    """GFLOP/s expected for work items of `flops` each; None where nothing was measured."""
    if strategy in ACCELERATORS:
        return ACCELERATORS[strategy].gflops
    if strategy == "tpu":
        base = (0.9 * (encoder_flops("base", 128) + lm_head_flops("base", 20)) +
                0.1 * (encoder_flops("base", 512) + lm_head_flops("base", 80)))
        return _TPU_BASE_EXAMPLES_PER_S * base / 1e9
    if strategy != "cpu":
        return None
    return _interpolated(_anchor_gflops(), flops)


def seconds_for(strategy: str, examples: float, flops: float) -> Optional[float]:
    gflops = achieved_gflops(strategy, flops)
    return None if gflops is None else examples * flops / (gflops * 1e9)


def _lstm_seconds(strategy: str, examples: float, flops: float) -> Optional[float]:
    if strategy == "cpu":
        return examples * flops / (CPU_LSTM_GFLOPS * 1e9)
    return seconds_for(strategy, examples, flops)


def _sum(*parts) -> Optional[float]:
    return None if any(p is None for p in parts) else sum(parts)


def _name(size: Optional[str]) -> str:
    return "MiniLM" if size is None else size.capitalize()


def estimate_basis(strategy: str) -> str:
    """What the estimates of `strategy` rest on, for the printed plan."""
    if strategy == "cpu":
        steps = ", ".join(f"{_name(size)} {cost.fixed_s * 1e3:.0f} ms + FLOPs at "
                          f"{cost.gflops:.0f} GFLOP/s"
                          for size, cost in sorted(CPU_FINETUNE.items(),
                                                   key=lambda x: parameters(x[0])))
        pretraining = ", ".join(
            f"{_name(size)} {rate:g}" for size, rate in
            sorted(CPU_PRETRAIN_EXAMPLES_PER_S["mixed_bfloat16"].items(), key=lambda x: x[1]))
        basis = (f"this project's 2-core CPU with AVX-512 BF16 (a fine-tuning step: {steps}, "
                 f"at each task's bucketed length; pretraining {pretraining} examples/s in "
                 f"bfloat16), scaled by FLOPs")
        if provenance.native_bfloat16() is False:
            basis += (f". This CPU emulates bfloat16: pretraining runs in float32 here, at "
                      f"~{CPU_EMULATED_BF16_SLOWDOWN:g}x those rates")
        return basis
    if strategy == "tpu":
        return "the paper's 4 Cloud TPUs (16 chips) for BERT-Base, scaled by FLOPs"
    return f"none measured for {strategy} ('?')"


# ------------------------------------------------------------------------------ runs
def data_seconds(corpus_bytes: int, dupe_factor: int, workers: int) -> float:
    """create_pretraining_data runs on CPU cores whatever the strategy."""
    return DATA_STARTUP_S + corpus_bytes * dupe_factor / (CPU_DATA_BYTES_PER_S * workers)


def pretrain_flops(size: str, objective: str, seq: int, predictions: int,
                   ltr_predictions: Optional[int] = None) -> float:
    # LTR predicts every next token (or its sampled --ltr_predictions); MLM the masked ones.
    positions = (ltr_predictions or seq - 1) if objective == "ltr" else predictions
    return encoder_flops(size, seq) + lm_head_flops(size, positions)


def pretrain_seconds(command: PretrainCommand) -> Optional[float]:
    """Training steps, plus the held-out evaluations (forward only: a third of the FLOPs)."""
    c, strategy = command, command.distribution.strategy
    flops = pretrain_flops(c.config, c.objective, c.max_seq_length, c.max_predictions_per_seq,
                           c.ltr_predictions)
    if c.phase2_fraction:
        long = pretrain_flops(c.config, c.objective, c.phase2_seq_length,
                              c.phase2_max_predictions_per_seq, c.ltr_predictions)
        flops = (1 - c.phase2_fraction) * flops + c.phase2_fraction * long
    evals = c.num_train_steps // c.eval_every + 1
    examples = c.num_train_steps * c.global_batch_size + evals * c.eval_steps * c.global_batch_size / 3
    if strategy == "cpu":
        gflops = cpu_pretrain_gflops(flops, c.distribution.precision)
        return STARTUP_S + examples * flops / (gflops * 1e9)
    return _sum(STARTUP_S, seconds_for(strategy, examples, flops))


def _capped_sizes(command: FinetuneCommand, sizes: TaskSizes) -> tuple:
    """(train, labelled eval, test) examples that one run of `command` reads."""
    train_n, eval_n, test_n = sizes
    train_n = min(train_n, command.max_train_examples or train_n)
    # Evaluation runs on up to two labelled splits (MNLI matched + mismatched).
    eval_n = min(eval_n, 2 * (command.max_eval_examples or eval_n))
    if command.max_eval_examples:
        test_n = 0
    return train_n, eval_n, test_n


def searched_learning_rates(command: FinetuneCommand, size: Optional[str]) -> tuple:
    """The rates `command` searches on the model of `size`: its own, else the grid
    glue_suite.run picks for the model."""
    return command.learning_rates or default_learning_rates(get_task(command.task),
                                                            shape(size)[1])[0]


def grid_size(command: FinetuneCommand, size: Optional[str]) -> int:
    """The restarts (learning rates x seeds) the estimate of `command` on the model of
    `size` counts."""
    return len(searched_learning_rates(command, size)) * command.seeds


def _finetune_sequences(command: FinetuneCommand, size: Optional[str],
                        sizes: TaskSizes) -> tuple:
    """(runs in the grid, trained sequences, evaluated sequences), over the whole grid."""
    spec = get_task(command.task)
    train_n, eval_n, test_n = _capped_sizes(command, sizes)
    grid = grid_size(command, size)
    epochs = command.epochs or spec.hparams.epochs
    per_example = len(spec.labels) if spec.kind == MULTIPLE_CHOICE else 1
    trained = grid * epochs * train_n * per_example
    evaluated = grid * eval_n * per_example + test_n * per_example
    return grid, trained, evaluated


def cpu_step_fixed_s(size: Optional[str]) -> float:
    """The fixed part of a fine-tuning step of this model on this CPU: the nearest
    measured model's, in proportion to the weights."""
    weights = parameters(size)
    anchor = min(CPU_FINETUNE, key=lambda a: abs(math.log(weights / parameters(a))))
    return CPU_FINETUNE[anchor].fixed_s * weights / parameters(anchor)


def cpu_finetune_seconds(examples: float, size: Optional[str], flops: float) -> float:
    """`examples` of `flops` each at the model's own FLOP/s on this CPU (measured or
    interpolated), whatever their length."""
    gflops = _interpolated(_anchor_gflops(), encoder_flops(size, 128))
    return examples * flops / (gflops * 1e9)


def cpu_training_seconds(examples: float, size: Optional[str], seq: int,
                         batch_size: int) -> float:
    """Fine-tuning steps over `examples` of `seq` tokens on this CPU: each step's fixed
    part, plus their FLOPs at the model's rate."""
    return (math.ceil(examples / batch_size) * cpu_step_fixed_s(size)
            + cpu_finetune_seconds(examples, size, encoder_flops(size, seq)))


def finetune_seconds(command: FinetuneCommand, size: Optional[str], sizes: TaskSizes,
                     units: Optional[int], frozen_cached: bool = False) -> Optional[float]:
    """`sizes`: the task's example counts in the data at hand; `units`: the BiLSTM's
    (of --head bilstm or --feature_mode), None without one; `frozen_cached`: a feature-
    based run whose frozen layers an earlier run of the plan computes."""
    if command.feature_mode:
        return feature_based_seconds(command, size, sizes, units, frozen_cached)
    strategy = command.distribution.strategy
    spec = get_task(command.task)
    seq = BUCKETED_TOKENS.get(command.task, spec.hparams.max_seq_length)
    grid, trained, evaluated = _finetune_sequences(command, size, sizes)
    hidden = shape(size)[1]
    if strategy == "cpu":
        train_s = cpu_training_seconds(trained, size, seq,
                                       command.batch_size or spec.hparams.batch_size)
        eval_s = cpu_finetune_seconds(evaluated, size, encoder_flops(size, seq, train=False))
    else:
        train_s = seconds_for(strategy, trained, encoder_flops(size, seq))
        eval_s = seconds_for(strategy, evaluated, encoder_flops(size, seq, train=False))
    lstm_s = 0.0
    if command.head == "bilstm":
        lstm_s = _sum(_lstm_seconds(strategy, trained, bilstm_flops(hidden, units, seq)),
                      _lstm_seconds(strategy, evaluated,
                                    bilstm_flops(hidden, units, seq, train=False)))
    return _sum(STARTUP_S * grid, train_s, eval_s, lstm_s)


def feature_based_seconds(command: FinetuneCommand, size: Optional[str], sizes: TaskSizes,
                          units: int, frozen_cached: bool) -> Optional[float]:
    """A frozen encoder's pass over every row once (unless cached), then a BiLSTM
    trained from scratch on the sentences' pieces, and its predictions."""
    strategy = command.distribution.strategy
    grid, trained, evaluated = _finetune_sequences(command, size, sizes)
    rows = sum(_capped_sizes(command, sizes))
    hidden = shape(size)[1]
    width = 4 * hidden if command.feature_mode == "concat_last_four" else hidden
    encoder = encoder_flops(size, BUCKETED_TOKENS[command.task], train=False)
    if frozen_cached:
        encoder_s = 0.0
    elif strategy == "cpu":
        encoder_s = cpu_finetune_seconds(rows, size, encoder)
    else:
        encoder_s = seconds_for(strategy, rows, encoder)
    seq = NER_SENTENCE_TOKENS
    return _sum(STARTUP_S * grid, encoder_s,
                _lstm_seconds(strategy, trained, bilstm_flops(width, units, seq)),
                _lstm_seconds(strategy, evaluated, bilstm_flops(width, units, seq, train=False)))


# --------------------------------------------------------------------- accelerators
@dataclasses.dataclass(frozen=True)
class Accelerator:
    """Hardware the dry run prices the paper plan on: its achieved FLOP/s, from a
    published BERT-Large pretraining throughput, and its on-demand price."""
    name: str
    gflops: float
    dollars_per_hour: float


def _large_blend_flops() -> float:
    """Training FLOPs of one BERT-Large sequence in the paper's 90% / 10% mix."""
    return (0.9 * pretrain_flops("large", "nsp", 128, 20) +
            0.1 * pretrain_flops("large", "nsp", 512, 80))


def _gflops_from_large(seq_per_s_128: float, seq_per_s_512: float) -> float:
    seconds = 0.9 / seq_per_s_128 + 0.1 / seq_per_s_512  # per sequence of the mix
    return _large_blend_flops() / seconds / 1e9


# Sources (quoted in full in the research notes behind this model):
# - 8 x A100: NVIDIA/DeepLearningExamples PyTorch/LanguageModeling/BERT/README.md (commit
#   1c7f6137d89ae25fad2c65de5f318f759c6fcbed), "Pre-training NVIDIA DGX A100 (8x A100
#   80GB)": 4591 seq/s at 128, 1657 at 512, mixed precision, LAMB at global batch 65k/32k
#   with gradient accumulation; the paper's batch of 256 all-reduces 256x more often per
#   sequence, so these are optimistic. Price: GCP a2-highgpu-8g (8 x A100 40GB) us-central1
#   on demand, $5.91582 VM + $23.47126 GPUs = $29.39/h, skypilot-org/skypilot-catalog
#   catalogs/v7/gcp/vms.csv (commit 017e2502fb63c7a28757acd94002b2d6099d3e3d, undated).
# - TPU v3-8 (4 chips): no published BERT throughput on a v3-8. Anchor: You et al. 2019
#   (LAMB, arXiv 1904.00962 v1, Table 1 "Baseline"): BERT-Large, 1M steps x 512 sequences
#   (90% at 128, 10% at 512) in 81.4 h on 16 TPU v3 chips = 1747 seq/s blended, scaled
#   linearly to 4 chips (437 seq/s). Price: tpu-v3-8 us-central1 on demand $8.00/h, same
#   SkyPilot catalog. (The paper's own "16 TPU chips x 4 days for Base" does not name the
#   TPU generation; see _TPU_BASE_EXAMPLES_PER_S for --strategy tpu estimates.)
_LAMB_V3_SEQ_PER_S = 1e6 * 512 / (81.4 * 3600) * 4 / 16  # of the 90/10 mix
ACCELERATORS = {
    "tpu-v3-8": Accelerator("TPU v3-8", _LAMB_V3_SEQ_PER_S * _large_blend_flops() / 1e9,
                            8.00),
    "8xa100": Accelerator("8 x A100", _gflops_from_large(4591.0, 1657.0), 29.39),
}
ACCELERATOR_ASSUMPTIONS = (
    "Assumptions: BERT-Large pretraining throughput (8xA100: NVIDIA's 4591/1657 seq/s at "
    "128/512, LAMB batch 65k; TPU v3-8: the LAMB paper's 16-chip baseline scaled to 4 "
    "chips) as achieved FLOP/s, applied by FLOPs to every run, fine-tuning included; "
    "on-demand $29.39/h (a2-highgpu-8g) and $8.00/h (v3-8); 30 s start-up a process, no "
    "preemption or data-transfer costs; data creation on the host CPUs.")


def accelerator_seconds(run, accelerator: str) -> Optional[float]:
    """A planned run's estimate on `accelerator` (an ACCELERATORS key): its command
    priced at that hardware's FLOP/s. `run`: a reproduce.plan.Run."""
    c = run.config
    if run.stage == "data":
        return run.estimate_s  # on the host's CPUs, whatever the accelerator
    command = dataclasses.replace(
        c, distribution=dataclasses.replace(c.distribution, strategy=accelerator))
    if run.stage == "pretrain":
        return pretrain_seconds(command)
    info = run.info
    return finetune_seconds(command, info["model"].get("size"), get_task(info["task"]).sizes,
                            info["bilstm_units"])
