"""A/B of building an encoder that a checkpoint then overwrites (issue 16, item 1's fixed
costs; issue 12's rehearsal): `BertEncoder.build()` drawing every weight from BERT's
truncated normal, against the same inside `bert_tf.initializers.skipped_draws()` (zeros,
as `glue_suite` and `load_encoder` now build before assigning), in one process, rounds
rotated. The assignment itself is the same for both and is not timed.

    python results/benchmark/build_ab.py --size base --rounds 5
    python results/benchmark/build_ab.py --size large --rounds 3

Prints the provenance header, each contender's median seconds with min-max, and draws /
skipped time with a 95% bootstrap interval over rounds.
"""

import argparse
import contextlib
import time

from bert_tf import timing
from bert_tf.config import config_for_size
from bert_tf.encoder import BertEncoder
from bert_tf.initializers import skipped_draws

VARIANTS = {"draws": contextlib.nullcontext, "skipped": skipped_draws}


def build_seconds(size: str, variant) -> float:
    encoder = BertEncoder(config_for_size(size))
    began = time.perf_counter()
    with variant():
        encoder.build()
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="base")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    print("\n".join(timing.header("results/benchmark/build_ab.py")), flush=True)
    seconds = timing.measured_rounds(
        {name: lambda v=variant: build_seconds(args.size, v) for name, variant in VARIANTS.items()},
        args.rounds, log=lambda line: print(line, flush=True))
    for name in VARIANTS:
        median, low, high = timing.spread(seconds[name])
        print(f"{name:>8}: build {median:.2f} s (min {low:.2f}, max {high:.2f})")
    ratio, low, high = timing.bootstrap_ratio(seconds["draws"], seconds["skipped"])
    print(f"{args.size}: build time draws / skipped: {ratio:.2f}x [95% CI {low:.2f}, {high:.2f}]")


if __name__ == "__main__":
    main()
