"""Pretraining data: raw text -> sharded TFRecords of BERT training instances.

    python -m bert_tf.create_pretraining_data --input_files 'pretraining/*/*,more/*.txt' \\
        --vocab_file vocab.txt --output_dir pretrain_128 --max_seq_length 128 \\
        --max_predictions_per_seq 20 --masked_lm_prob 0.15 --dupe_factor 1 \\
        --short_seq_prob 0.1 --random_seed 12345 [--objective nsp|no_nsp|ltr] \\
        [--mask_rates 0.8,0.1,0.1] [--do_whole_word_mask] [--num_workers N]

The stage, like google-research/bert's `create_pretraining_data.py`, in five modules:
  text_sources           files -> documents -> sentences (WikiExtractor `<doc>` files,
                         Project Gutenberg books, one sentence per line)
  this module            sentences -> WordPiece ids, one token file per input file (the
                         first pass); then each file's instances from its token file and
                         the others' (the second); the files run through worker processes
  shard_set              their records dealt to shards, moved into place, metadata.json
  pretraining_instances  a document's ids -> training instances (the original
                         algorithm; the objectives and a worked example)
  pretraining_dataset    an instance -> a tf.train.Example (the record features)

Differences from the original beyond those of `pretraining_instances`, all for streaming
with bounded memory (the original holds the whole corpus, tokenized, in memory):

- Long documents (over `text_sources.MAX_DOCUMENT_SENTENCES`, 1000 sentences) are
  processed in pieces of that many sentences; no instance spans two pieces, and no
  random next comes from the same document.
- Output order. The original shuffles all instances and deals them round-robin to its
  output files. Here each file's instances are dealt round-robin, in input order, to
  ceil(N / shard_size) shards and each shard is then shuffled in memory, so every
  shard is a random sample of the whole corpus in random order.

Memory, per worker, is one document piece, one tokenizer batch (4096 sentences) and the
window; the main process holds one shard (`shard_size` records) while shuffling it.
None of these grows with the corpus (measured: ~850 MB per process, of which ~780 MB
is TensorFlow itself). The token files are on disk, in the output directory's temporary
directory until the shards are written: ~4 bytes a token (~150 MB for 150 MB of
Wikipedia text). Reading the window from them instead of tokenizing the text again for
it halves the work of "nsp" data.

Determinism: file i uses `random.Random(f"{seed}/{i}")` and writes its own temporary
file; shard j is shuffled with `random.Random(f"{seed}/shard/{j}")`. The same inputs,
flags and seed give the same bytes with any number of workers.
"""

import argparse
import collections
import dataclasses
import glob
import itertools
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from typing import Iterator, Optional

import numpy as np
import tensorflow as tf
import tqdm

from bert_tf import portable_paths, shard_set, text_sources
from bert_tf.cli import (EXIT_INPUT_ERROR, InputError, MissingInputError, check_output_dir,
                         run_main)
from bert_tf.files import file_sha256
from bert_tf.pretraining_dataset import METADATA_FILE, feature_spec, instance_to_example
from bert_tf.pretraining_instances import (OBJECTIVES, DataConfig, Document, Source, Vocab,
                                           RandomDocumentPool, create_nsp_instances,
                                           create_packed_instances)
from bert_tf.tokenization import BertTokenizer

TOKENIZE_BATCH_SENTENCES = 4096  # tf-text is fast per batch and slow per call
TABLE_ROWS_PER_READ = 4096  # documents whose (index, sentences) a token file read takes

# What `create_pretraining_data` counts, in the order it reports them.
COUNTS = (
    "files", "empty_files", "unreadable_files", "documents", "empty_documents",
    "sentences", "tokens", "invalid_utf8_lines", "long_lines_split",
    "gutenberg_without_end", "instances", "next_sentence_random",
    "random_next_from_same_document", "maskable_tokens", "masked_tokens",
    "masked_as_mask", "masked_as_same", "masked_as_random")


# ----------------------------------------------------------------------------------
# Reading: files -> tokenized documents.

def _tokenize(batch: list[tuple[Source, list[str]]],
              tokenizer: BertTokenizer) -> list[tuple[Source, Document]]:
    """Tokenizes the sentences of many documents in one call."""
    sentences = [s for _, document in batch for s in document]
    ragged = tokenizer.tokenize(sentences)  # [S, (pieces)]
    ids = ragged.flat_values.numpy().tolist()
    splits = ragged.row_splits.numpy().tolist()
    out, k = [], 0
    for source, document in batch:
        # A sentence of only control characters has no pieces; drop it, as the original.
        tokens = [ids[splits[j]:splits[j + 1]] for j in range(k, k + len(document))]
        tokens = [t for t in tokens if t]
        k += len(document)
        if tokens:
            out.append((source, tokens))
    return out


def tokenized_documents(path: str, file_index: int, tokenizer: BertTokenizer,
                        stats: collections.Counter, max_bytes: int | None = None
                        ) -> Iterator[tuple[Source, Document]]:
    """Streams one file's documents as WordPiece ids, tokenizing in large batches; only
    from its first `max_bytes` where given (a rehearsal's input cap)."""
    batch, num_sentences = [], 0
    for index, sentences in text_sources.read_documents(path, stats, max_bytes=max_bytes):
        batch.append(((file_index, index), sentences))
        num_sentences += len(sentences)
        if num_sentences >= TOKENIZE_BATCH_SENTENCES:
            yield from _tokenize(batch, tokenizer)
            batch, num_sentences = [], 0
    if batch:
        yield from _tokenize(batch, tokenizer)


# ----------------------------------------------------------------------------------
# Token files: each input file's tokenized documents, written once, read by its own
# instances and by the random-next window of every other file.

def token_file_paths(prefix: str) -> tuple[str, str, str]:
    """A token file's three files: its token ids (int32), its sentences' lengths and its
    document table (index, number of sentences; int64)."""
    return prefix + ".ids", prefix + ".sentences", prefix + ".documents"


def write_token_file(documents: Iterator[tuple[Source, Document]], prefix: str) -> None:
    """Appends each document to the token file `prefix` (`token_file_paths`) as it comes:
    nothing is held in memory. If `documents` raises, what came before stays written."""
    ids_path, lengths_path, table_path = token_file_paths(prefix)
    with open(ids_path, "wb") as ids, open(lengths_path, "wb") as lengths, \
            open(table_path, "wb") as table:
        for (_, index), document in documents:
            ids.write(np.fromiter(itertools.chain.from_iterable(document), np.int32)
                      .tobytes())
            lengths.write(np.array([len(s) for s in document], np.int64).tobytes())
            table.write(np.array([index, len(document)], np.int64).tobytes())


def read_token_file(prefix: str, file_index: int) -> Iterator[tuple[Source, Document]]:
    """The documents `write_token_file` wrote, in order (none if it never ran), read a
    document at a time: memory does not grow with the file (a memory map would keep
    every page read resident)."""
    ids_path, lengths_path, table_path = token_file_paths(prefix)
    if not os.path.exists(table_path):
        return
    with open(ids_path, "rb") as ids, open(lengths_path, "rb") as lengths, \
            open(table_path, "rb") as table:
        while len(rows := np.fromfile(table, np.int64, 2 * TABLE_ROWS_PER_READ)):
            for index, num_sentences in rows.reshape(-1, 2).tolist():
                ends = np.cumsum(np.fromfile(lengths, np.int64, num_sentences)).tolist()
                flat = np.fromfile(ids, np.int32, ends[-1]).tolist()
                yield (file_index, index), [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]


def _other_files_documents(prefixes: list[str], file_index: int
                           ) -> Iterator[tuple[Source, Document]]:
    """The documents of the files after `file_index`, then before it, then its own."""
    order = list(range(file_index + 1, len(prefixes))) + list(range(file_index + 1))
    for j in order:
        yield from read_token_file(prefixes[j], j)


# ----------------------------------------------------------------------------------
# The two passes, each one input file at a time (in worker processes): its text ->
# its token file; then its token file (and the others', for random next segments) ->
# one temporary TFRecord file of its instances.

_worker = {}  # the tokenizer and Vocab of this process, made by _init_worker


def _init_worker(vocab_file: str, lower_case: bool | None, single_thread: bool) -> None:
    if single_thread:  # one process per core; TF's own threads would only compete
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)
    _worker.update(tokenizer=tokenizer, vocab=Vocab.from_tokenizer(tokenizer))


def _tokenize_file(task: tuple[int, str, int | None, str]):
    """Writes the token file of one input file; returns its reading counts."""
    file_index, path, max_bytes, prefix = task
    stats, problems = collections.Counter(files=1), []
    try:
        write_token_file(tokenized_documents(path, file_index, _worker["tokenizer"], stats,
                                             max_bytes), prefix)
    except OSError as e:
        stats["unreadable_files"] += 1
        problems.append(f"{path}: unreadable ({e})")
    if not stats["unreadable_files"] and not stats["documents"]:
        stats["empty_files"] += 1
        problems.append(f"{path}: no documents")
    return file_index, stats, problems


def _process_file(task: tuple[int, list[str], DataConfig, str]):
    """Writes the instances of the file whose token file is prefixes[file_index] to
    out_path; returns its counts."""
    file_index, prefixes, config, out_path = task
    vocab = _worker["vocab"]
    stats = collections.Counter()
    rng = random.Random(f"{config.random_seed}/{file_index}")
    pool = None
    if config.objective == "nsp":
        pool = RandomDocumentPool(_other_files_documents(prefixes, file_index),
                                  config.pool_documents, config.pool_tokens)
    with tf.io.TFRecordWriter(out_path) as writer:
        for source, document in read_token_file(prefixes[file_index], file_index):
            num_tokens = sum(map(len, document))
            stats["tokens"] += num_tokens
            if pool is not None:
                pool.advance(num_tokens)
            for _ in range(config.dupe_factor):
                if config.objective == "nsp":
                    instances = create_nsp_instances(document, source, pool, config,
                                                     vocab, rng, stats)
                else:
                    instances = create_packed_instances(document, config, vocab, rng,
                                                        stats)
                for instance in instances:
                    example = instance_to_example(instance, config.max_seq_length,
                                                  config.max_predictions_per_seq)
                    writer.write(example.SerializeToString(deterministic=True))
    return file_index, stats, []


# ----------------------------------------------------------------------------------
# Input files.

def expand_input_patterns(patterns: str, max_files_per_pattern: int | None = None
                          ) -> list[str]:
    """Comma-separated globs (`**` recurses) -> files, each glob's matches sorted (the
    first `max_files_per_pattern` of them where given).

    Raises ValueError for a glob that matches no file (directories do not count).
    """
    files = {}  # an ordered set
    for pattern in filter(None, (p.strip() for p in patterns.split(","))):
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matches:
            raise InputError(pattern, None, "--input_files matches no file")
        files.update(dict.fromkeys(matches[:max_files_per_pattern]))
    if not files:
        raise ValueError("--input_files is empty")
    return list(files)


# ----------------------------------------------------------------------------------
# The whole run, step by step.

def create_pretraining_data(input_files: list[str], vocab_file: str, output_dir: str,
                            config: DataConfig, lower_case: bool | None = None,
                            num_workers: int = 1, shard_size: int = 10_000,
                            overwrite: bool = False, command: str | None = None,
                            progress: bool = True, data_dir: str | None = None) -> dict:
    """Writes `output_dir/part-*-of-*.tfrecord` and `metadata.json`; returns the metadata.

    Args:
        input_files: text files, in the order that fixes the output (see
            `expand_input_patterns`).
        vocab_file: WordPiece vocabulary.
        output_dir: where the shards and metadata.json go.
        config: how instances are made.
        lower_case: lowercase the text; None infers it from the vocabulary.
        num_workers: processes, one input file at a time each (1: in this process).
        shard_size: instances per output shard (about).
        overwrite: replace shards already in output_dir instead of failing.
        command: the command line, recorded in metadata.json.
        progress: show a progress bar on stderr.
        data_dir: the data directory, which metadata.json's paths name $BERT_DATA_DIR
            (bert_tf.portable_paths).

    Raises:
        ValueError: bad arguments, or no instance could be made from the input.
    """
    _check_arguments(input_files, vocab_file, num_workers, shard_size)
    shard_set.clear_output_dir(output_dir, overwrite)
    start = time.time()
    tokenizer = BertTokenizer(vocab_file, lower_case=lower_case)  # checks the vocabulary
    tmp_dir = tempfile.mkdtemp(prefix=".tmp-", dir=output_dir)
    try:
        parts = [os.path.join(tmp_dir, f"file-{i:05d}.tfrecord")
                 for i in range(len(input_files))]
        stats, skipped = _write_file_parts(input_files, parts, config, tokenizer,
                                           vocab_file, lower_case, num_workers, progress,
                                           tmp_dir)
        metadata = portable_paths.portable_record(
            _metadata(command, input_files, vocab_file, tokenizer, config, num_workers,
                      shard_size, stats, skipped), data_dir, output_dir)
        num_instances = stats["instances"]
        if num_instances == 0:
            metadata["shards"] = []
            shard_set.write_metadata(metadata, output_dir)
            raise InputError(
                os.path.join(output_dir, METADATA_FILE), None,
                f"no training instances were made from {len(input_files)} input files "
                f"({stats['documents']} documents, {stats['tokens']} tokens); "
                f"skipped: {skipped[:5]}")
        metadata["shards"] = shard_set.write_shards(parts, num_instances, tmp_dir,
                                                    shard_size, config.random_seed, tmp_dir)
        seconds = time.time() - start
        metadata.update(num_instances=num_instances, seconds=round(seconds, 1),
                        instances_per_second=round(num_instances / seconds, 1),
                        peak_rss_mb=_peak_rss_mb())
        shard_set.move_into_place(metadata, tmp_dir, output_dir)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return metadata


def _check_arguments(input_files: list[str], vocab_file: str, num_workers: int,
                     shard_size: int) -> None:
    if not input_files:
        raise ValueError("no input files")
    if not os.path.isfile(vocab_file):
        raise MissingInputError(vocab_file, "vocabulary file not found (--vocab_file)")
    if num_workers < 1 or shard_size < 1:
        raise ValueError("num_workers and shard_size must be >= 1")


def _write_file_parts(input_files: list[str], parts: list[str], config: DataConfig,
                      tokenizer: BertTokenizer, vocab_file: str, lower_case: bool | None,
                      num_workers: int, progress: bool, tmp_dir: str
                      ) -> tuple[collections.Counter, list]:
    """Writes the instances of input_files[i] to parts[i], in `num_workers` processes:
    every file's token file first (under tmp_dir), since any file's random next segments
    may come from any other, then every file's instances.

    Returns the summed counts and what was skipped, in input order.
    """
    prefixes = [os.path.join(tmp_dir, f"tokens-{i:05d}") for i in range(len(input_files))]
    sizes = [os.path.getsize(f) if os.path.exists(f) else 0 for f in input_files]
    if num_workers == 1:
        _worker.update(tokenizer=tokenizer, vocab=Vocab.from_tokenizer(tokenizer))
        pool, map_files = None, map
    else:
        # "spawn": each worker imports TF afresh (forking a process that already runs
        # TF threads is unsafe).
        pool = multiprocessing.get_context("spawn").Pool(
            num_workers, initializer=_init_worker, initargs=(vocab_file, lower_case, True))
        map_files = pool.imap_unordered
    try:
        stats, problems = _each_file(
            map_files, _tokenize_file,
            [(i, f, config.max_bytes_per_file, prefixes[i]) for i, f in enumerate(input_files)],
            sizes, "tokenize", progress)
        instance_stats, _ = _each_file(
            map_files, _process_file,
            [(i, prefixes, config, parts[i]) for i in range(len(input_files))],
            sizes, "instances", progress)
    finally:
        if pool is not None:
            pool.close()
            pool.join()  # so that RUSAGE_CHILDREN sees the workers
    for prefix in prefixes:  # no longer needed: free the disk before sharding
        for path in token_file_paths(prefix):
            if os.path.exists(path):
                os.remove(path)
    return stats + instance_stats, problems


def _each_file(map_files, work, tasks: list, sizes: list[int], stage: str,
               progress: bool) -> tuple[collections.Counter, list]:
    """Runs work(task) for every file's task, with a progress bar over the input bytes;
    returns the summed counts and the problems, in input order."""
    stats, problems = collections.Counter(), {}
    bar = tqdm.tqdm(total=sum(sizes), unit="B", unit_scale=True, file=sys.stderr,
                    desc=f"create_pretraining_data ({stage})", disable=not progress,
                    mininterval=2.0)
    for file_index, file_stats, file_problems in map_files(work, tasks):
        stats.update(file_stats)
        problems[file_index] = file_problems
        bar.update(sizes[file_index])
        if stats["instances"]:
            bar.set_postfix(instances=stats["instances"], refresh=False)
    bar.close()
    return stats, [p for i in sorted(problems) for p in problems[i]]


def _metadata(command: str | None, input_files: list[str], vocab_file: str,
              tokenizer: BertTokenizer, config: DataConfig, num_workers: int,
              shard_size: int, stats: collections.Counter, skipped: list[str]) -> dict:
    """metadata.json's settings and counts (the shards and timings are added later)."""
    spec = feature_spec(config.max_seq_length, config.max_predictions_per_seq)
    return {
        "command": command,
        "input_files": len(input_files),
        "vocab_file": os.path.abspath(vocab_file),
        "vocab_size": tokenizer.vocab_size,
        "vocab_sha256": file_sha256(vocab_file),
        "lower_case": tokenizer.lower_case,
        "config": dataclasses.asdict(config),
        "random_seed": config.random_seed,
        "num_workers": num_workers,
        "shard_size": shard_size,
        "feature_spec": {name: {"shape": s.shape, "dtype": s.dtype.name}
                         for name, s in spec.items()},
        "counts": {key: stats[key] for key in COUNTS},
        "skipped": skipped,
    }


def _peak_rss_mb() -> dict:
    # ru_maxrss is in KiB on Linux; for children it is the largest finished child (the
    # workers, and a helper that importing TF runs). Importing TF alone takes ~780 MB.
    return {"main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "largest_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


# ----------------------------------------------------------------------------------
# Command line.

def build_parser() -> argparse.ArgumentParser:
    """The command line's flags (each a `DataConfig` field or a `create_pretraining_data`
    argument)."""
    p = argparse.ArgumentParser(prog="python -m bert_tf.create_pretraining_data",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--input_files", required=True,
                   help="comma-separated globs of text files (** recurses)")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--output_dir", required=True)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--mask_rates", default="0.8,0.1,0.1",
                   help="fractions of selected tokens -> [MASK], same, random token")
    p.add_argument("--dupe_factor", type=int, default=10,
                   help="times each document is used, with different masks")
    p.add_argument("--short_seq_prob", type=float, default=0.1)
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--do_whole_word_mask", action="store_true")
    p.add_argument("--objective", choices=OBJECTIVES, default="nsp")
    p.add_argument("--dynamic_masking", action="store_true",
                   help="write unmasked records for bert_tf.dynamic_masking")
    p.add_argument("--do_lower_case", choices=("auto", "true", "false"), default="auto",
                   help="auto: uncased if the vocabulary has no capitals")
    p.add_argument("--num_workers", type=int, default=1)
    p.add_argument("--shard_size", type=int, default=10_000, help="instances per shard")
    p.add_argument("--pool_documents", type=int, default=1000,
                   help="random next segments come from this many recent documents")
    p.add_argument("--pool_tokens", type=int, default=250_000,
                   help="... holding at most this many tokens")
    # Input caps, for rehearsing a plan in minutes; none of them is a setting of the paper.
    p.add_argument("--max_files_per_pattern", type=int, default=None,
                   help="use only the first N files each --input_files glob matches")
    p.add_argument("--max_bytes_per_file", type=int, default=None,
                   help="read only about the first N bytes of each input file (whole "
                        "lines; per file, so any --num_workers gives the same shards)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace shards already in --output_dir")
    return p


def _data_config(args: argparse.Namespace) -> DataConfig:
    return DataConfig(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob,
        mask_rates=tuple(float(r) for r in args.mask_rates.split(",")),
        short_seq_prob=args.short_seq_prob, dupe_factor=args.dupe_factor,
        do_whole_word_mask=args.do_whole_word_mask, objective=args.objective,
        dynamic_masking=args.dynamic_masking, random_seed=args.random_seed,
        pool_documents=args.pool_documents, pool_tokens=args.pool_tokens,
        max_bytes_per_file=args.max_bytes_per_file)


def main(argv: list[str] | None = None) -> Optional[int]:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # also for the workers
    check_output_dir(args.output_dir, "--output_dir")
    data_dir = os.environ.get(portable_paths.DATA_DIR_VAR)
    try:
        config = _data_config(args)
        input_files = expand_input_patterns(args.input_files, args.max_files_per_pattern)
        lower_case = {"auto": None, "true": True, "false": False}[args.do_lower_case]
        metadata = create_pretraining_data(
            input_files, args.vocab_file, args.output_dir, config, lower_case=lower_case,
            num_workers=args.num_workers, shard_size=args.shard_size,
            overwrite=args.overwrite, data_dir=data_dir,
            command=portable_paths.command_line("bert_tf.create_pretraining_data", argv,
                                                data_dir))
    except InputError:
        raise  # a bad input file or directory: run_main prints it
    except ValueError as e:  # a flag the run cannot honour
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    _print_summary(metadata, args.output_dir)


def _print_summary(metadata: dict, output_dir: str) -> None:
    counts, rss = metadata["counts"], metadata["peak_rss_mb"]
    print(f"{metadata['num_instances']} instances in {len(metadata['shards'])} shards "
          f"under {output_dir} from {counts['files']} files, {counts['documents']} "
          f"documents, {counts['tokens']} tokens", file=sys.stderr)
    print(f"{metadata['seconds']:.1f} s, {metadata['instances_per_second']:.1f} "
          f"instances/s; peak memory {rss['main']:.0f} MB (main), "
          f"{rss['largest_child']:.0f} MB (largest worker)", file=sys.stderr)
    bad = {k: counts[k] for k in ("empty_files", "unreadable_files", "empty_documents",
                                  "invalid_utf8_lines", "long_lines_split",
                                  "gutenberg_without_end",
                                  "random_next_from_same_document") if counts[k]}
    if bad:
        print(f"skipped or repaired: {bad}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
