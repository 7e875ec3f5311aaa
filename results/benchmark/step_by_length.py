"""How a fine-tuning step's cost grows with the sequence length, ours beside HF PyTorch's:
the shipped checkpoint's shape (MiniLM, L6/H384/A12, intermediate 1,536), the train step
of `bert_tf.benchmark` (encoder + classification head, AdamW, dropout 0.1) at batch 32,
float32, one process, every (model, length) pair timed in rounds rotated together.

    python results/benchmark/step_by_length.py --lengths 64,128,192,256,384 --rounds 4

The question it answers: the cost model (`reproduce.cost_model.CPU_FINETUNE`) prices a
step as a fixed part plus its FLOPs at one rate, fitted on GLUE's short sequences
(12-67 tokens). SQuAD's windows average 174 tokens; if the rate falls with the length
(attention's [B, A, T, T] tensors), its estimate is short. Prints each pair's median
seconds per step (min-max) and its matmul GFLOP/s (`training_flops_per_example`), and
the machine's float32 matmul peak, which the cpu plan's estimates scale by
(`reproduce.units.speed_note`).
"""

import argparse

from bert_tf import benchmark, timing
from reproduce.models import config

MINILM = config(None)  # the shipped checkpoint's shape


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="64,128,192,256,384")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--models", default="ours,hf_torch")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/step_by_length.py")), flush=True)
    lengths = [int(x) for x in args.lengths.split(",")]
    steps = {}
    for length in lengths:
        batch = benchmark.random_batch(MINILM, args.batch_size, length)
        for model in args.models.split(","):
            peer = benchmark.RUNNERS[model](MINILM, batch, "train", "float32", False)
            peer.step()  # traces
            peer.step()
            steps[(model, length)] = peer.step
    seconds = timing.run_rounds({f"{m} T={t}": step for (m, t), step in steps.items()},
                                args.rounds, log=lambda line: print(line, flush=True))
    print(f"\nbatch {args.batch_size}, float32, {args.rounds} rounds: median s/step (min-max), "
          f"GFLOP/s of the matmuls; float32 matmul peak "
          f"{benchmark.matmul_peak_gflops('float32'):.0f} GFLOP/s")
    for (model, length) in steps:
        median, low, high = timing.spread(seconds[f"{model} T={length}"])
        flops = args.batch_size * benchmark.training_flops_per_example(MINILM, length, True)
        print(f"{model:<9} T={length:<4} {median:7.3f} ({low:.3f}-{high:.3f})  "
              f"{flops / median / 1e9:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
