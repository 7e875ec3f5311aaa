"""Pretraining data creation side by side: `bert_tf.create_pretraining_data` against
tf-models-official's port of google-research/bert's create_pretraining_data.py.

    python -m bert_tf.data_benchmark --input_files 'PATTERNS' \
        --vocab_file $BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt \
        --max_bytes_per_file 1000000 --rounds 3 --memory_repeats 1,4

1. Both read the same text: the input files as `bert_tf.text_sources` reads them (each
   cut to --max_bytes_per_file), written once in the original's input format (one
   sentence per line, a blank line between documents), one corpus file per input file.
2. Speed: each round runs both tools once on that corpus, each a fresh process timed
   from launch to exit (both pay their imports), with the same settings and
   --num_workers for ours (the original has one process); the order is rotated every
   round. Instances/s = the TFRecords each wrote / its seconds. Peak memory is that of
   the largest process of each tool's process tree (`os.wait4`).
3. Memory: ours alone on the input files themselves, whole (no byte cap), and on the
   same files listed N times (--memory_repeats; links with distinct names): its peak
   memory should not grow with the corpus. The original keeps every document and every
   instance in memory until it writes, so its memory grows with the corpus; it is run
   on the speed corpus only.

Prints per-round seconds and instances/s, medians with their range, the ratio ours /
original with a bootstrap interval over rounds, the memory table, and the command,
commit, date and machine (`bert_tf.provenance`); --output_file also writes it as JSON.
"""

import argparse
import collections
import os
import shlex
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

from bert_tf import portable_paths, provenance, text_sources, timing
from bert_tf.create_pretraining_data import expand_input_patterns
from bert_tf.tokenization import infer_lower_case

TOOLS = ("bert_tf", "tfm")


# ---------------------------------------------------------------------------------------
# The shared corpus and the two command lines
# ---------------------------------------------------------------------------------------

def write_line_corpus(input_files: list, corpus_dir: str, max_bytes: int | None) -> dict:
    """Each input file's documents, as `text_sources` reads them, into corpus_dir/NNNNN.txt
    in the original's format; returns the counts read."""
    os.makedirs(corpus_dir, exist_ok=True)
    stats = collections.Counter()
    for index, path in enumerate(input_files):
        with open(os.path.join(corpus_dir, f"{index:05d}.txt"), "w", encoding="utf-8") as out:
            for _, sentences in text_sources.read_documents(path, stats, max_bytes=max_bytes):
                out.write("\n".join(sentences) + "\n\n")
    stats["bytes"] = sum(os.path.getsize(os.path.join(corpus_dir, name))
                         for name in os.listdir(corpus_dir))
    return dict(stats)


def ours_command(args, input_files: list, output_dir: str) -> list:
    return [sys.executable, "-m", "bert_tf.create_pretraining_data",
            "--input_files", ",".join(input_files), "--vocab_file", args.vocab_file,
            "--output_dir", output_dir, "--max_seq_length", str(args.max_seq_length),
            "--max_predictions_per_seq", str(args.max_predictions_per_seq),
            "--masked_lm_prob", str(args.masked_lm_prob),
            "--dupe_factor", str(args.dupe_factor), "--short_seq_prob", str(args.short_seq_prob),
            "--random_seed", str(args.random_seed), "--objective", "nsp",
            "--num_workers", str(args.num_workers), "--overwrite"]


def tfm_command(args, input_files: list, output_dir: str) -> list:
    return [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
            f"--input_file={','.join(input_files)}", f"--vocab_file={args.vocab_file}",
            f"--output_file={os.path.join(output_dir, 'instances.tfrecord')}",
            f"--do_lower_case={infer_lower_case(args.vocab_file)}",  # as ours infers it
            f"--max_seq_length={args.max_seq_length}",
            f"--max_predictions_per_seq={args.max_predictions_per_seq}",
            f"--masked_lm_prob={args.masked_lm_prob}", f"--dupe_factor={args.dupe_factor}",
            f"--short_seq_prob={args.short_seq_prob}", f"--random_seed={args.random_seed}"]


def count_records(output_dir: str) -> int:
    # Counted in the dataset's graph: one record at a time in Python costs ~0.2 ms each
    # (bert_tf.shard_set._read_records), minutes for the memory runs' million records.
    paths = tf.io.gfile.glob(os.path.join(output_dir, "*.tfrecord"))
    return int(tf.data.TFRecordDataset(paths).reduce(tf.constant(0, tf.int64),
                                                     lambda count, _: count + 1))


def run_tool(command: list, output_dir: str) -> dict:
    """Runs one tool to completion: {"seconds", "instances", "peak_rss_mb"}; the peak is
    that of the largest process of its tree (wait4 reports the child's own and that of
    every descendant it waited for)."""
    os.makedirs(output_dir, exist_ok=True)
    log = os.path.join(output_dir, "log.txt")
    with open(log, "w") as out:
        began = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = round(time.perf_counter() - began, 2)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if process.returncode:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"failed ({shlex.join(command)}):\n{tail}")
    instances = count_records(output_dir)
    return {"seconds": seconds, "instances": instances,
            "instances_per_second": round(instances / seconds, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def repeated_inputs(input_files: list, repeats: int, link_dir: str) -> list:
    """The input files `repeats` times over, as links with distinct names (ours reads
    each listed file once, whatever its name)."""
    if repeats == 1:
        return list(input_files)
    os.makedirs(link_dir, exist_ok=True)
    links = []
    for copy in range(repeats):
        for index, path in enumerate(input_files):
            link = os.path.join(link_dir, f"{copy}-{index:05d}-{os.path.basename(path)}")
            if not os.path.lexists(link):
                os.symlink(os.path.abspath(path), link)
            links.append(link)
    return links


# ---------------------------------------------------------------------------------------
# The benchmark and its report
# ---------------------------------------------------------------------------------------

def benchmark(args, command: str, work_dir: str) -> dict:
    input_files = expand_input_patterns(args.input_files)
    rounds, corpus = [], None
    if args.rounds:
        corpus_dir = os.path.join(work_dir, "corpus")
        corpus = write_line_corpus(input_files, corpus_dir, args.max_bytes_per_file)
        corpus_files = [os.path.join(corpus_dir, n) for n in sorted(os.listdir(corpus_dir))]
        print(f"corpus: {len(corpus_files)} files, {corpus['bytes'] / 1e6:.1f} MB, "
              f"{corpus.get('documents', 0)} documents", file=sys.stderr, flush=True)
    commands = {"bert_tf": ours_command, "tfm": tfm_command}
    for number in range(args.rounds):
        results = {}
        for tool in timing.rotated(list(TOOLS), number):
            output_dir = os.path.join(work_dir, f"{tool}-{number}")
            results[tool] = run_tool(commands[tool](args, corpus_files, output_dir), output_dir)
            print(f"round {number + 1}/{args.rounds}: {tool} {results[tool]}",
                  file=sys.stderr, flush=True)
        rounds.append(results)
    memory = []
    for repeats in args.memory_repeats:
        inputs = repeated_inputs(input_files, repeats, os.path.join(work_dir, f"x{repeats}"))
        output_dir = os.path.join(work_dir, f"memory-x{repeats}")
        result = run_tool(ours_command(args, inputs, output_dir), output_dir)
        memory.append({"repeats": repeats, "input_files": len(inputs), **result})
        print(f"memory x{repeats}: {result}", file=sys.stderr, flush=True)
    return {**provenance.stamp(command),
            "settings": {k: v for k, v in vars(args).items() if k != "output_file"},
            "corpus": corpus, "rounds": rounds, "summary": summarize(rounds) if rounds else None,
            "memory": memory}


def summarize(rounds: list) -> dict:
    rates = {tool: [r[tool]["instances_per_second"] for r in rounds] for tool in TOOLS}
    ratio, low, high = timing.bootstrap_ratio(rates["bert_tf"], rates["tfm"])
    return {"instances_per_second": {tool: timing.spread(v) for tool, v in rates.items()},
            "peak_rss_mb": {tool: max(r[tool]["peak_rss_mb"] for r in rounds) for tool in TOOLS},
            "instances": {tool: rounds[0][tool]["instances"] for tool in TOOLS},
            "ratio": {"of_medians": round(ratio, 3), "low": round(low, 3),
                      "high": round(high, 3)}}


def report(record: dict) -> str:
    lines = [*provenance.stamp_lines(record)]
    if record["rounds"]:
        lines += ["", *speed_report(record)]
    if record["memory"]:
        lines += ["", "bert_tf on the input files themselves (whole), and repeated:",
                  "repeats  files  instances  seconds  inst/s  peak MB (largest process)"]
        lines += [f"{m['repeats']:>7}  {m['input_files']:>5}  {m['instances']:>9}  "
                  f"{m['seconds']:>7.0f}  {m['instances_per_second']:>6.0f}  "
                  f"{m['peak_rss_mb']:>7.0f}" for m in record["memory"]]
    return "\n".join(lines)


def speed_report(record: dict) -> list:
    summary, corpus = record["summary"], record["corpus"]
    lines = [f"speed corpus: {corpus['bytes'] / 1e6:.1f} MB in the original's format, "
             f"{corpus.get('documents', 0)} documents, {corpus.get('sentences', 0)} sentences; "
             f"dupe_factor {record['settings']['dupe_factor']}, bert_tf num_workers "
             f"{record['settings']['num_workers']}, tfm one process",
             "round " + "".join(f"{t:>30}" for t in TOOLS)]
    for number, results in enumerate(record["rounds"], start=1):
        lines.append(f"{number:>5} " + "".join(
            f"{r['seconds']:>9.1f}s {r['instances_per_second']:>9.1f} inst/s" + " " * 3
            for r in (results[t] for t in TOOLS)))
    for tool in TOOLS:
        median, low, high = summary["instances_per_second"][tool]
        lines.append(f"{tool}: {summary['instances'][tool]} instances, median "
                     f"{median:.1f} inst/s ({low:.1f}-{high:.1f}), peak memory "
                     f"{summary['peak_rss_mb'][tool]:.0f} MB")
    ratio = summary["ratio"]
    lines.append(f"instances/s bert_tf / tfm: {ratio['of_medians']:.2f}x "
                 f"(95% bootstrap over rounds {ratio['low']:.2f}-{ratio['high']:.2f})")
    return lines


def _repeats(text: str) -> tuple:
    try:
        values = tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        values = ()
    if text and (not values or min(values) < 1):
        raise argparse.ArgumentTypeError(f"expected comma-separated counts >= 1, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bert_tf.data_benchmark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input_files", required=True,
                   help="comma-separated globs of text files (as create_pretraining_data)")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--max_bytes_per_file", type=int, default=None,
                   help="the speed corpus: about the first N bytes of each input file")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--short_seq_prob", type=float, default=0.1)
    p.add_argument("--dupe_factor", type=int, default=1)
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--num_workers", type=int, default=1, help="bert_tf's processes")
    p.add_argument("--rounds", type=int, default=3, help="0: the memory runs only")
    p.add_argument("--memory_repeats", type=_repeats, default=(1, 4),
                   help="ours alone on the whole input files repeated N times, e.g. 1,4 "
                        "('' to skip)")
    p.add_argument("--work_dir", help="default: a temporary directory, removed afterwards")
    p.add_argument("--output_file", help="also write the record as JSON")
    return p


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    data_dir = os.environ.get(portable_paths.DATA_DIR_VAR)
    command = portable_paths.command_line("bert_tf.data_benchmark", argv, data_dir)
    if args.work_dir:
        record = benchmark(args, command, args.work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="data_benchmark_") as work_dir:
            record = benchmark(args, command, work_dir)
    print(report(record))
    if args.output_file:
        portable_paths.write_record_beside(args.output_file, record, data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
