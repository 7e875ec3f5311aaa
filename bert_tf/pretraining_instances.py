"""Pretraining instances: a document's WordPiece ids -> BERT training instances.

Pure Python (no TensorFlow): `create_pretraining_data` reads and tokenizes the text, runs
this on every document and writes the instances as records (`pretraining_dataset` has
their features and reads them back). The algorithm is google-research/bert's
`create_pretraining_data.py`, on WordPiece ids instead of token strings:

- A document's sentences are gathered into a chunk until it reaches a target length:
  `max_seq_length - 3` tokens, or with probability `short_seq_prob` a random length in
  [2, max_seq_length - 3] (to lessen the mismatch with short fine-tuning inputs).
- The chunk is split at a random sentence boundary into A and B. With probability 1/2
  (always if the chunk is one sentence) B is replaced by text from another document,
  starting at a random sentence, and the chunk's unused sentences are put back.
- The longer of A and B loses a token, from its front or back at random, until the
  pair fits.
- `min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))` tokens
  other than [CLS]/[SEP] are selected (len(tokens) counts [CLS] and [SEP], as in the
  original); each becomes [MASK], stays, or becomes a token drawn uniformly from the
  whole vocabulary, at `mask_rates` (80/10/10 in the paper; Table 8's ablations are
  other rates). With `do_whole_word_mask` a word's "##" pieces are selected with it.
- Each document is used `dupe_factor` times, with different splits and masks.

For objective "nsp" (the paper: masked LM + next sentence prediction), with
max_seq_length 16 and max_predictions_per_seq 4 (15 tokens: round(2.25) = 2 picks),
an instance padded into its record features:

  position      0     1   2   3      4  5   6     7     8  9      10 11    12 13   14    15
  tokens        [CLS] the man [MASK] to the store [SEP] he bought a  apple of milk [SEP] [PAD]
  input_mask    1     1   1   1      1  1   1     1     1  1      1  1     1  1    1     0
  segment_ids   0     0   0   0      0  0   0     0     1  1      1  1     1  1    1     0
  masked_lm_positions 3 11 0 0; masked_lm_ids = ids of "went", "gallon", 0, 0;
  masked_lm_weights 1 1 0 0; next_sentence_labels 0.
  ("went" became [MASK]; "gallon" became the random token "apple".)

- "no_nsp" (the paper's "No NSP" ablation): `[CLS] text [SEP]`, the document's tokens
  cut into consecutive segments that ignore sentence boundaries (each filled to
  max_seq_length - 2 tokens, or a short random length with probability
  short_seq_prob; a cut never splits a word's ## pieces; the last one of a document
  may be short). segment_ids all 0, next_sentence_labels 0; masked as above.
- "ltr" (the paper's left-to-right "LTR & No NSP" model): the same segments, not
  masked: masked_lm_positions/ids/weights all 0, next_sentence_labels 0. The trainer
  predicts input_ids[t + 1] from input_ids[:t + 1] with causal attention.
- With `dynamic_masking` ("nsp" or "no_nsp"), input_ids are left unmasked and the
  masked_lm_* features are all 0; `bert_tf.dynamic_masking` masks each batch anew.

Differences from the original, for streaming with bounded memory (the original holds
the whole corpus, tokenized, in memory; `create_pretraining_data` lists the others):

- Random next segments. The original draws them from any document of the corpus. Here
  each input file is processed on its own, and B segments come from a bounded window
  (`RandomDocumentPool`: `pool_documents` documents, `pool_tokens` tokens) over the
  documents of the *other* files, read by a second reader that starts at the next file
  (in input order, the file itself last) and moves on as many tokens as the file being
  processed. So a negative is always from another document (10 tries, as in the
  original; failures, possible only in a tiny corpus, are counted), the same excerpt is
  rarely drawn twice, and the result does not depend on `num_workers`. The window reads
  the other files' token files (`create_pretraining_data` tokenizes each file once,
  to disk), so the price is reading about twice as many tokens, not tokenizing twice.
- The target length is drawn anew for every segment; the original draws it once per
  document, so a whole book would be short 10% of the time.
"""

import collections
import dataclasses
import random
from typing import Iterator, NamedTuple

OBJECTIVES = ("nsp", "no_nsp", "ltr")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """How training instances are made from documents.

    Args:
        max_seq_length: T, the padded length of input_ids, [CLS] and [SEP]s included.
        max_predictions_per_seq: P, the most masked-LM predictions per instance.
        masked_lm_prob: the fraction of tokens selected for prediction.
        mask_rates: of the selected tokens, the fractions replaced by [MASK], kept, and
            replaced by a random token (sum 1).
        short_seq_prob: probability that a segment gets a random, shorter target length.
        dupe_factor: how many times each document is used (with different masks).
        do_whole_word_mask: select a word's ## pieces together with it.
        objective: "nsp", "no_nsp" or "ltr" (see the module docstring).
        dynamic_masking: write unmasked records for `bert_tf.dynamic_masking`.
        random_seed: seed of every random choice.
        pool_documents, pool_tokens: size of the window of other files' documents that
            random next segments come from.
        max_bytes_per_file: read only about the first N bytes of each input file
            (None: all); a budget cap for rehearsals, not a setting of the paper.
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    mask_rates: tuple[float, float, float] = (0.8, 0.1, 0.1)
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False
    objective: str = "nsp"
    dynamic_masking: bool = False
    random_seed: int = 12345
    pool_documents: int = 1000
    pool_tokens: int = 250_000
    max_bytes_per_file: int | None = None

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        min_length = 5 if self.objective == "nsp" else 3  # specials + 1 token per segment
        if self.max_seq_length < min_length:
            raise ValueError(f"max_seq_length must be >= {min_length} for objective "
                             f"{self.objective!r}, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be >= 1, got "
                             f"{self.max_predictions_per_seq}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if (len(self.mask_rates) != 3 or min(self.mask_rates) < 0
                or abs(sum(self.mask_rates) - 1.0) > 1e-6):
            raise ValueError(f"mask_rates must be three non-negative fractions "
                             f"([MASK], same, random) that sum to 1, got {self.mask_rates}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.pool_documents < 1 or self.pool_tokens < 1:
            raise ValueError("pool_documents and pool_tokens must be >= 1")

    @property
    def static_masks(self) -> bool:
        """Whether masks are written into the records."""
        return self.objective != "ltr" and not self.dynamic_masking


class Vocab(NamedTuple):
    """What instance creation needs to know about the vocabulary."""
    size: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_subword: list[bool]  # [size]: the piece starts with "##"

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "Vocab":
        """From a `tokenization.BertTokenizer` (not imported: this module has no TF)."""
        return cls(tokenizer.vocab_size, tokenizer.cls_id, tokenizer.sep_id,
                   tokenizer.mask_id, [t.startswith("##") for t in tokenizer.vocab])


class Instance(NamedTuple):
    """One training instance, before padding."""
    input_ids: list[int]  # [CLS] A [SEP] (B [SEP]), after masking
    segment_ids: list[int]
    masked_lm_positions: list[int]  # ascending
    masked_lm_ids: list[int]  # the original ids at those positions
    next_sentence_label: int  # 1: B is from another document


# A document is a list of sentences, each a list of WordPiece ids; its source is
# (file index, document index), shared by the pieces of a long document.
Source = tuple[int, int]
Document = list[list[int]]


# ----------------------------------------------------------------------------------
# Instance creation (the original algorithm, on ids).

def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int,
                      rng: random.Random) -> None:
    """Shortens the longer list (B on ties) by one token at a time until the pair fits.

    The token comes off the front or the back at random "to add more randomness and
    avoid biases" (the pretraining variant of the original; fine-tuning's
    `tokenization.truncate_seq_pair` always drops from the back).
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_masked_lm_predictions(tokens: list[int], config: DataConfig, vocab: Vocab,
                                 rng: random.Random, stats: collections.Counter):
    """Masks a packed sequence. Returns (masked tokens, positions, original ids)."""
    candidates = []  # lists of positions that are selected together
    for i, token in enumerate(tokens):
        if token == vocab.cls_id or token == vocab.sep_id:
            continue
        if config.do_whole_word_mask and candidates and vocab.is_subword[token]:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    rng.shuffle(candidates)
    num_to_predict = min(config.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * config.masked_lm_prob))))

    mask_rate, same_rate, random_rate = config.mask_rates
    # The original's two draws: random() < 0.8, then random() < 0.5 among the rest.
    same_given_not_mask = same_rate / (same_rate + random_rate) if mask_rate < 1 else 0.0
    output = list(tokens)
    positions = []
    for index_set in candidates:
        if len(positions) >= num_to_predict:
            break
        # A whole word that would exceed the budget is skipped, as in the original.
        if len(positions) + len(index_set) > num_to_predict:
            continue
        for index in index_set:
            if rng.random() < mask_rate:
                output[index] = vocab.mask_id
                stats["masked_as_mask"] += 1
            elif rng.random() < same_given_not_mask:
                stats["masked_as_same"] += 1
            else:
                output[index] = rng.randint(0, vocab.size - 1)
                stats["masked_as_random"] += 1
            positions.append(index)
    positions.sort()
    stats["maskable_tokens"] += sum(map(len, candidates))
    stats["masked_tokens"] += len(positions)
    return output, positions, [tokens[i] for i in positions]


def _target_length(max_num_tokens: int, config: DataConfig, rng: random.Random) -> int:
    # Usually fill the sequence (padding is wasted compute), sometimes a shorter one.
    if rng.random() < config.short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _make_instance(segments: list[list[int]], is_random_next: bool, config: DataConfig,
                   vocab: Vocab, rng: random.Random,
                   stats: collections.Counter) -> Instance:
    tokens, segment_ids = [vocab.cls_id], [0]
    for segment_id, segment in enumerate(segments):
        tokens += segment + [vocab.sep_id]
        segment_ids += [segment_id] * (len(segment) + 1)
    positions, labels = [], []
    if config.static_masks:
        tokens, positions, labels = create_masked_lm_predictions(tokens, config, vocab,
                                                                 rng, stats)
    stats["instances"] += 1
    stats["next_sentence_random"] += int(is_random_next)
    return Instance(tokens, segment_ids, positions, labels, int(is_random_next))


class RandomDocumentPool:
    """Where random next segments come from: a moving window over other documents.

    The window is filled to `max_tokens` at the start and then reads on as many tokens
    as the caller processes (`advance`), dropping its oldest documents to stay within
    `max_documents` and `max_tokens` (it always keeps the newest one).

    Args:
        documents: an iterator of (source, document), the other files' documents.
        max_documents, max_tokens: the size of the window.
    """

    def __init__(self, documents: Iterator[tuple[Source, Document]], max_documents: int,
                 max_tokens: int):
        self._documents = documents
        self._max_documents = max_documents
        self._max_tokens = max_tokens
        self._window = collections.deque()  # (source, document, num_tokens)
        self._window_tokens = 0
        self._budget = 0  # how many tokens may have been read so far
        self._read = 0
        self.advance(max_tokens)

    def advance(self, num_tokens: int) -> None:
        self._budget += num_tokens
        while self._read < self._budget:
            item = next(self._documents, None)
            if item is None:
                return
            source, document = item
            n = sum(map(len, document))
            self._read += n
            self._window.append((source, document, n))
            self._window_tokens += n
            while len(self._window) > 1 and (len(self._window) > self._max_documents or
                                             self._window_tokens > self._max_tokens):
                self._window_tokens -= self._window.popleft()[2]

    def sample(self, rng: random.Random, avoid: Source) -> tuple[Source, Document] | None:
        """A random document, from a source other than `avoid` if 10 tries find one
        (as in the original); None if the window is empty."""
        if not self._window:
            return None
        for _ in range(10):
            source, document, _ = self._window[rng.randrange(len(self._window))]
            if source != avoid:
                break
        return source, document


def create_nsp_instances(document: Document, source: Source, pool: RandomDocumentPool,
                         config: DataConfig, vocab: Vocab, rng: random.Random,
                         stats: collections.Counter) -> Iterator[Instance]:
    """Sentence-pair instances from one document (`create_instances_from_document`)."""
    max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
    target_length = _target_length(max_num_tokens, config, rng)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            # How many of the chunk's sentences go into A.
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                tokens_b = _random_next_segment(pool, source, document,
                                                target_length - len(tokens_a), rng, stats)
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            yield _make_instance([tokens_a, tokens_b], is_random_next, config, vocab, rng,
                                 stats)
            chunk, chunk_length = [], 0
            target_length = _target_length(max_num_tokens, config, rng)
        i += 1


def _random_next_segment(pool: RandomDocumentPool | None, source: Source,
                         document: Document, target_length: int, rng: random.Random,
                         stats: collections.Counter) -> list[int]:
    """Sentences of another document from a random one on, to about `target_length`."""
    sample = pool.sample(rng, avoid=source) if pool is not None else None
    if sample is None or sample[0] == source:
        stats["random_next_from_same_document"] += 1
    other = document if sample is None else sample[1]
    tokens = []
    for sentence in other[rng.randint(0, len(other) - 1):]:
        tokens.extend(sentence)
        if len(tokens) >= target_length:
            break
    return tokens


def create_packed_instances(document: Document, config: DataConfig, vocab: Vocab,
                            rng: random.Random,
                            stats: collections.Counter) -> Iterator[Instance]:
    """Single-segment instances of contiguous text ("no_nsp" and "ltr")."""
    tokens = [t for sentence in document for t in sentence]
    max_num_tokens = config.max_seq_length - 2  # [CLS], [SEP]
    start = 0
    while start < len(tokens):
        end = min(start + _target_length(max_num_tokens, config, rng), len(tokens))
        # Keep a word's ## pieces with it: end the segment before the word that the cut
        # would split, unless the segment is one long word.
        cut = end
        while cut < len(tokens) and cut > start and vocab.is_subword[tokens[cut]]:
            cut -= 1
        if cut > start:
            end = cut
        yield _make_instance([tokens[start:end]], False, config, vocab, rng, stats)
        start = end
