"""Tests of bert_tf.text_sources: files -> documents -> sentences."""

import collections

from bert_tf import text_sources


def test_wiki_documents(tmp_path):
    path = tmp_path / "wiki_00"
    path.write_text(
        '<doc id="1" url="?curid=1" title="Stub">\nStub\n\n</doc>\n'
        '<doc id="2" url="?curid=2" title="AT&amp;T">\nAT&T\n\n'
        "AT&T is a company. It was founded by Mr. Bell in 1885.\nHistory.\n"
        "It grew.\n</doc>\n"
        '<doc id="3" title="No end">\nNo end\nA line without an end tag.\n')
    stats = collections.Counter()
    assert text_sources.detect_format(str(path)) == "wiki"
    docs = list(text_sources.read_documents(str(path), stats))
    assert docs == [
        (0, ["AT&T is a company.", "It was founded by Mr. Bell in 1885.", "History.",
             "It grew."]),
        (1, ["A line without an end tag."])]
    assert stats["empty_documents"] == 1 and stats["documents"] == 2


def test_gutenberg_book(tmp_path):
    path = tmp_path / "pg1.txt"
    text = ("\ufeffThe Project Gutenberg EBook of Tests\r\n\r\nTitle: Tests\r\n"
            "*** START OF THIS PROJECT GUTENBERG EBOOK TESTS ***\r\n\r\n"
            "Produced by A Volunteer\r\n\r\nCHAPTER I.\r\n\r\n"
            "It was a dark\r\nand stormy night. The rain\r\nfell.\r\n\r\n"
            "“Who is there?” said he.\r\n\r\n"
            "End of the Project Gutenberg EBook of Tests\r\n"
            "*** END OF THIS PROJECT GUTENBERG EBOOK TESTS ***\r\nLicence text.\r\n")
    path.write_bytes(text.encode("utf-8"))
    assert text_sources.detect_format(str(path)) == "gutenberg"
    docs = list(text_sources.read_documents(str(path), collections.Counter()))
    assert docs == [(0, ["CHAPTER I.", "It was a dark and stormy night.", "The rain fell.",
                         "“Who is there?” said he."])]


def test_lines_documents_and_long_documents(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("Project Gutenberg is mentioned.\nOne sentence. Not split.\n\n\n"
                    + "".join(f"s{i}\n" for i in range(25)))
    assert text_sources.detect_format(str(path)) == "lines"
    stats = collections.Counter()
    docs = list(text_sources.read_documents(str(path), stats, max_document_sentences=10))
    assert docs[0] == (0, ["Project Gutenberg is mentioned.", "One sentence. Not split."])
    assert [(i, len(s)) for i, s in docs[1:]] == [(1, 10), (1, 10), (1, 5)]  # one document
    assert stats["documents"] == 2 and stats["empty_documents"] == 0


def test_long_lines_are_cut_between_words_and_characters(tmp_path):
    path = tmp_path / "long.txt"
    words = ("é" * 30 + " ") * 10  # 610 bytes
    path.write_bytes(f"{words}\n{'ü' * 100}\nshort\n".encode())
    stats = collections.Counter()
    lines = list(text_sources.read_lines(str(path), stats, max_line_bytes=100))
    assert lines[-1] == "short" and all(len(line.encode()) <= 200 for line in lines)
    e_pieces, u_pieces = lines[:-1][:-3], lines[:-1][-3:]  # 610 bytes -> 7, 200 -> 3
    assert "".join(e_pieces) == words and all(p.endswith(" ") for p in e_pieces)
    assert "".join(u_pieces) == "ü" * 100  # no character cut in two
    assert stats["long_lines_split"] == 2 and stats["invalid_utf8_lines"] == 0


def test_a_long_line_is_split_into_sentences(tmp_path):
    """In a one-sentence-per-line file, a line over max_line_bytes is no sentence: its
    sentences come back whole, also those cut between two pieces."""
    sentences = [f"Sentence number {i} says {'a' * (i % 7 + 1)} things." for i in range(300)]
    path = tmp_path / "one_line.txt"
    path.write_text("A short first line.\n\n" + " ".join(sentences) + "\nlast\n")
    stats = collections.Counter()
    docs = list(text_sources.read_documents(str(path), stats, max_line_bytes=500))
    assert [s for _, d in docs for s in d] == ["A short first line."] + sentences + ["last"]
    assert stats["long_lines_split"] == 1 and stats["documents"] == 2
