"""WordPiece tokenization and `[CLS] A [SEP] B [SEP]` packing, in-graph.

The tokenizer reproduces google-research/bert `tokenization.py` (`FullTokenizer`:
`BasicTokenizer` then `WordpieceTokenizer`) with TensorFlow and tensorflow-text ops only,
so it runs inside `tf.data.Dataset.map` and inside a SavedModel `tf.function` that takes
raw strings.

`tf_text.BertTokenizer` is close to the original but not equal to it: on 30,000 lines of
GLUE, Wikipedia and CoNLL text it gives the original's ids for 99.81% of lines with the
uncased vocabulary and 99.02% with the cased one (this module: 100%). The differences we
fix:

1. Lowercasing. tf-text uses NFKC_Casefold, which also applies compatibility mappings:
   "…" -> "...", "ﬁ" -> "fi", "²" -> "2", "ß" -> "ss", full-width "ＡＢＣ" -> "abc". The
   original uses Python's `str.lower()`; `tf.strings.lower(encoding="utf-8")` (ICU full
   lowercase mapping, final sigma included) is the same function.
2. Control characters. tf-text replaces Cc/Cf with a space, so "inter\\u00adnational"
   (soft hyphen, common in Wikipedia) becomes two words. The original deletes Cc/Cf
   characters (except \\t \\n \\r) and U+FFFD.
3. Whitespace. RE2's `\\s` is ASCII-only; the original splits on every Zs character
   (no-break space, thin space, ...) and, through `str.split()`, on U+2028/U+2029.
4. Word length. tf-text's `max_bytes_per_word` counts UTF-8 bytes; the original's
   `max_input_chars_per_word` counts characters.
5. Pair truncation. `tf_text.ShrinkLongestTrimmer` drops from segment A on ties; the
   original `_truncate_seq_pair` drops from B (see `pack_inputs`).

WordPiece itself (greedy longest-match-first; a word with an unmatchable remainder
becomes a single [UNK]) is `tf_text.FastWordpieceTokenizer`, whose LinMaxMatch algorithm
gives the same pieces as the original's quadratic loop in linear time.
"""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.cli import InputError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Character classes of the original BasicTokenizer, as RE2 patterns.
# `_is_whitespace` (" ", \t, \n, \r, Zs) plus what `str.split()` also splits on that
# `_clean_text` keeps (Zl, Zp); the other `str.split()` separators are Cc and deleted.
_WHITESPACE = r"[\t\n\r\p{Z}]"
# `_clean_text` deletes NUL, U+FFFD and `_is_control` (Cc, Cf; \t\n\r are mapped to
# spaces above first).
_CONTROL = r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]"
# `_is_punctuation`: all non-alphanumeric printable ASCII, plus Unicode P*.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# `_is_chinese_char`: the CJK Unified Ideographs blocks; each is split off as a word.
_CJK = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
        r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")


def load_vocab(vocab_file: str) -> list[str]:
    """Reads a WordPiece vocabulary: one token per line, id = line number (from 0).

    Lines are split on "\\n" only (a vocabulary may contain U+2028 or U+0085 as tokens,
    which `str.splitlines()` would split) and stripped, as the original `load_vocab` does.
    """
    if not tf.io.gfile.exists(vocab_file):
        raise InputError(vocab_file, None, "vocabulary file not found")
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(vocab_file, raw.count(b"\n", 0, e.start) + 1,
                         "not valid UTF-8; expected a WordPiece vocabulary") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    vocab = [line.strip() for line in lines]
    if not any(vocab):
        raise InputError(vocab_file, None, "vocabulary file is empty")
    return vocab


def infer_lower_case(vocab_file: str) -> bool:
    """True for an uncased vocabulary: (almost) none of its word pieces has capitals.

    BERT-Base uncased has 0 capitalised pieces, BERT-Base cased 29%; the 1% threshold
    leaves room for a few stray entries.
    """
    return _has_no_capitals(load_vocab(vocab_file))


def _has_no_capitals(vocab: list[str]) -> bool:
    pieces = [t for t in vocab if not (t.startswith("[") and t.endswith("]"))]
    capitalised = sum(t != t.lower() for t in pieces)
    return capitalised <= 0.01 * len(pieces)


class BertTokenizer(tf.Module):
    """Text -> WordPiece ids, with the original BERT BasicTokenizer rules, in-graph.

    Args:
        vocab_file: WordPiece vocabulary, one token per line; must contain
            [PAD], [UNK], [CLS], [SEP] and [MASK].
        lower_case: lowercase and strip accents (NFD, drop Mn), as for "uncased" models.
            None infers it from the vocabulary (`infer_lower_case`).
        max_chars_per_word: words (after basic tokenization) longer than this many
            characters become [UNK]. The original `WordpieceTokenizer` defaults to 200,
            Hugging Face and tf-text to 100; words of 101-200 characters are rare enough
            (URLs, chemical names) that either choice gives the same ids in practice.
    """

    def __init__(self, vocab_file: str, lower_case: bool | None = None,
                 max_chars_per_word: int = 100):
        super().__init__()
        self.vocab = load_vocab(vocab_file)
        self.vocab_size = len(self.vocab)
        self.lower_case = _has_no_capitals(self.vocab) if lower_case is None else lower_case
        if max_chars_per_word < 1:
            raise ValueError(f"max_chars_per_word must be >= 1, got {max_chars_per_word}")
        self.max_chars_per_word = max_chars_per_word

        ids = {}
        for i, token in enumerate(self.vocab):
            if token in ids:
                raise InputError(vocab_file, i + 1, f"token {token!r} on line {i + 1} "
                                                    f"already appeared on line {ids[token] + 1}")
            ids[token] = i
        missing = [t for t in SPECIAL_TOKENS if t not in ids]
        if missing:
            raise InputError(vocab_file, None, f"vocabulary lacks the special tokens {missing}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            ids[t] for t in SPECIAL_TOKENS)

        # The byte limit never binds (a character is at most 4 bytes); the character
        # limit is applied in `_wordpiece`.
        self._wordpiece_tokenizer = tf_text.FastWordpieceTokenizer(
            self.vocab, max_bytes_per_word=4 * max_chars_per_word, token_out_type=tf.int32,
            unknown_token="[UNK]", no_pretokenization=True)

    def _basic_tokenize(self, text):
        """Original BasicTokenizer: string tensor [...] -> words [..., (words)]."""
        # convert_to_unicode(): invalid UTF-8 bytes are dropped ("ignore").
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
        # _clean_text(); whitespace first, because \t \n \r are Cc too.
        text = tf.strings.regex_replace(text, _WHITESPACE, " ")
        text = tf.strings.regex_replace(text, _CONTROL, "")
        if self.lower_case:
            # The original lowercases and strips accents per whitespace token, before
            # splitting punctuation; neither step creates or removes spaces, so doing it
            # on the whole string first is the same.
            text = tf.strings.lower(text, encoding="utf-8")
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, r"\p{Mn}", "")
        # Split on spaces (dropped) and around punctuation and CJK characters (kept).
        return tf_text.regex_split(text, f" +|{_PUNCTUATION}|{_CJK}",
                                   f"{_PUNCTUATION}|{_CJK}")

    def _wordpiece(self, words):
        """Words [..., (words)] -> int32 ids [..., (words), (pieces)]."""
        def cap_length(w):
            # A too-long word is replaced by the literal "[UNK]", which WordPiece maps to
            # the single [UNK] piece: the original's max_input_chars_per_word rule.
            too_long = tf.strings.length(w, unit="UTF8_CHAR") > self.max_chars_per_word
            return tf.where(too_long, "[UNK]", w)
        return self._wordpiece_tokenizer.tokenize(tf.ragged.map_flat_values(cap_length, words))

    def tokenize_words(self, strings) -> tf.RaggedTensor:
        """Strings [B] -> int32 ids [B, (words), (pieces)], grouped by basic-tokenizer word
        (what whole-word masking needs)."""
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank not in (None, 1):
            raise ValueError(f"expected a batch of strings of shape [B], got shape "
                             f"{strings.shape}; batch the dataset before tokenizing")
        return self._wordpiece(self._basic_tokenize(strings))

    def tokenize(self, strings) -> tf.RaggedTensor:
        """Strings [B] -> int32 WordPiece ids [B, (pieces)]."""
        return self.tokenize_words(strings).merge_dims(1, 2)

    def tokenize_pretokenized(self, words) -> tf.RaggedTensor:
        """Given words [B, (words)] -> int32 ids [B, (words), (pieces)].

        Each given word goes through the basic tokenizer too (so "U.S." gives the pieces
        of "u", ".", "s", "."), and its pieces stay together: the alignment that NER and
        SQuAD labels need. A word that is only whitespace or control characters gets
        zero pieces, as in the original.
        """
        if not isinstance(words, tf.RaggedTensor):
            words = tf.ragged.constant(words, dtype=tf.string)
        if words.shape.rank != 2:
            raise ValueError(f"expected words of shape [B, (words)], got {words.shape}")
        # [B, (words), (sub-words)] -> [B, (words), (sub-words), (pieces)]
        pieces = self._wordpiece(self._basic_tokenize(words))
        return pieces.merge_dims(2, 3)

    def convert_ids_to_tokens(self, ids) -> list[str]:
        """1-D ids (list, numpy array or eager tensor) -> WordPiece strings."""
        return [self.vocab[i] for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist()]


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int) -> None:
    """Truncates a pair in place to at most `max_num_tokens` in total (the original).

    Drops one token at a time from the end of the longer list, because a shorter
    sequence carries more information per token than a longer one; on a tie it drops
    from B.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _truncated_pair_lengths(len_a, len_b, budget):
    """Lengths that `truncate_seq_pair` leaves, in closed form (int tensors [B]).

    The loop shortens the longer segment until both are equal, then alternates B, A,
    B, ..., so when both are long A keeps ceil(budget / 2) and B the rest; a short
    segment is kept whole and the other gets what is left.
    """
    new_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
    new_b = tf.minimum(len_b, budget - new_a)
    return new_a, new_b


def _keep_first(segment, lengths):
    """The first `lengths[i]` items of each row of a ragged [B, (N)] tensor."""
    positions = tf.ragged.range(tf.cast(segment.row_lengths(), lengths.dtype))  # [B, (N)]
    return tf.ragged.boolean_mask(segment, positions < tf.expand_dims(lengths, 1))


# Packing, as in google-research/bert `convert_single_example`. For a pair with
# max_seq_length = 12:
#
#   text_a = "The dog is hairy."   text_b = "Is it?"
#   tokens:       [CLS] the  dog  is   hairy .    [SEP] is   it   ?    [SEP] [PAD]
#   input_ids:    101   1996 3899 2003 15892 1012 102   2003 2009 1029 102   0
#   segment_ids:  0     0    0    0    0     0    0     1    1    1    1     0
#   input_mask:   1     1    1    1    1     1    1     1    1    1    1     0
#
# [CLS] A [SEP] is segment 0 and B [SEP] segment 1; [CLS]'s final hidden state is the
# sequence representation for classification. A single sentence is `[CLS] A [SEP]`.
# When the pair is too long, the longer segment loses its last token until it fits,
# and on a tie B does. With max_seq_length = 8 (5 tokens of text):
#
#   A = the dog is hairy .   B = is it ?
#   (5, 3) -> (4, 3) -> (3, 3) -> tie, drop from B -> (3, 2)
#   tokens:       [CLS] the dog is [SEP] is it [SEP]
#   segment_ids:  0     0   0   0  0     1  1  1
def pack_inputs(segments: list[tf.RaggedTensor], max_seq_length: int, cls_id: int,
                sep_id: int) -> dict:
    """Truncates, adds [CLS]/[SEP] and zero-pads one or two segments, in-graph.

    Args:
        segments: one or two int ragged tensors [B, (pieces)] (sentence A, sentence B).
        max_seq_length: T, the padded length, counting [CLS] and [SEP]s.
        cls_id, sep_id: ids of [CLS] and [SEP].

    Returns:
        {"input_ids", "input_mask", "segment_ids"}, each int32 [B, T].
    """
    if len(segments) not in (1, 2):
        raise ValueError(f"pack_inputs takes 1 or 2 segments, got {len(segments)}")
    num_special = len(segments) + 1  # [CLS] and one [SEP] per segment
    if max_seq_length < num_special:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for "
                         f"{num_special} special tokens with {len(segments)} segment(s); "
                         f"need max_seq_length >= {num_special}")
    budget = max_seq_length - num_special
    segments = [tf.cast(s, tf.int32) for s in segments]
    lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]
    if len(segments) == 1:
        new_lengths = [tf.minimum(lengths[0], budget)]
    else:
        new_lengths = _truncated_pair_lengths(lengths[0], lengths[1], budget)
    segments = [_keep_first(s, n) for s, n in zip(segments, new_lengths)]

    ids, segment_ids = tf_text.combine_segments(segments, cls_id, sep_id)  # [B, (T)]
    input_ids, input_mask = tf_text.pad_model_inputs(ids, max_seq_length)  # [B, T]
    segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length)
    return {"input_ids": tf.cast(input_ids, tf.int32),
            "input_mask": tf.cast(input_mask, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32)}


class BertPreprocessor(tf.Module):
    """Raw strings -> packed model inputs: a tokenizer plus `pack_inputs`, in-graph.

    Use it in `tf.data.Dataset.map` on batches of strings, or in a SavedModel
    `tf.function` with an input signature of string tensors [None].

    Args:
        tokenizer: the BertTokenizer.
        max_seq_length: T, the padded length of every output.
    """

    def __init__(self, tokenizer: BertTokenizer, max_seq_length: int = 128):
        super().__init__()
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be >= 2 ([CLS] and [SEP]), got "
                             f"{max_seq_length}")
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length

    def __call__(self, text_a, text_b=None) -> dict:
        """Strings [B] (and [B]) -> {"input_ids", "input_mask", "segment_ids"} int32 [B, T]."""
        segments = [self.tokenizer.tokenize(text_a)]
        if text_b is not None:
            segments.append(self.tokenizer.tokenize(text_b))
        return pack_inputs(segments, self.max_seq_length, self.tokenizer.cls_id,
                           self.tokenizer.sep_id)
