"""Documents cut into chunks for agent knowledge: markdown structure kept, every chunk the
document's own text within `max_chars`, and linear time on every hostile shape.

Every call goes through `chunked`, which checks what holds of any chunking (each chunk is
`document[start:end]`, in order and apart, within `max_chars`, never blank at its edges,
every visible character in some chunk, headings bounded), so each input of each test is a
case of the property too; the property tests add the hostile shapes and generated text.

Linearity is timed as `test_hostile_text_is_linear` times it, with its helpers: this thread's
CPU time (other processes' load is not counted), the fastest of 3 runs at 16 KiB and at 1 MiB,
measured again before failing. The cost per byte at 1 MiB may be 8 times that at 16 KiB;
quadratic work would be 64 times."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodic.domain import chunking
from episodic.domain.chunking import (
    MAX_HEADING_CHARS,
    MAX_HEADING_LEVELS,
    Chunk,
    DocumentFormat,
    TooManyChunks,
    chunk_document,
)
from tests.unit.test_hostile_text_is_linear import fastest, of_size

MD, TEXT = DocumentFormat.MARKDOWN, DocumentFormat.TEXT


def chunked(
    document: str, fmt: DocumentFormat = MD, max_chars: int = 1600, min_chars: int = 200
) -> list[Chunk]:
    chunks = chunk_document(document, fmt, max_chars, min_chars)
    assert_well_formed(document, fmt, max_chars, chunks)
    return chunks


def assert_well_formed(document: str, fmt: DocumentFormat, max_chars: int, chunks: list[Chunk]) -> None:
    covered = 0
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert chunk.text == document[chunk.start : chunk.end]
        assert covered <= chunk.start < chunk.end  # in order, apart, never empty
        assert not document[covered : chunk.start].strip(), "visible text left out"
        assert len(chunk.text) <= max_chars
        assert chunk.text.split("\n", 1)[0].strip(), "starts with a blank line"
        assert not chunk.text[-1].isspace()
        assert len(chunk.heading_path) <= MAX_HEADING_LEVELS
        assert all(len(heading) <= MAX_HEADING_CHARS for heading in chunk.heading_path)
        assert fmt == MD or chunk.heading_path == ()
        covered = chunk.end
    assert not document[covered:].strip(), "visible text left out"


def texts(chunks: list[Chunk]) -> list[str]:
    return [chunk.text for chunk in chunks]


def paths(chunks: list[Chunk]) -> list[tuple[str, ...]]:
    return [chunk.heading_path for chunk in chunks]


# Empty input and the edges of a chunk


@pytest.mark.parametrize("fmt", [MD, TEXT])
@pytest.mark.parametrize("document", ["", " ", "\n" * 1000, "\r\n\t \u3000\n"])
def test_an_empty_or_whitespace_only_document_has_no_chunks(document: str, fmt: DocumentFormat) -> None:
    assert chunked(document, fmt) == []


def test_a_short_document_is_one_chunk_without_its_surrounding_blank_lines() -> None:
    document = "\n\n  \nHello there.\n\nA second paragraph.  \n\n\n"
    assert chunked(document) == [Chunk(0, "Hello there.\n\nA second paragraph.", 5, 38, ())]


def test_a_chunk_starting_a_line_keeps_its_indentation() -> None:
    (chunk,) = chunked("\n    indented code\n")
    assert chunk.text == "    indented code" and chunk.start == 1


def test_limits_that_cannot_hold_a_chunk_are_refused() -> None:
    with pytest.raises(ValueError, match="max_chars must be positive and min_chars not negative"):
        chunk_document("text", MD, max_chars=0)
    with pytest.raises(ValueError, match="max_chars must be positive and min_chars not negative"):
        chunk_document("text", MD, min_chars=-1)


# Headings

NESTED = "# A\n\na\n\n## B\n\nb\n\n### C\n\nc\n\n## D\n\nd\n\n# E\n\ne\n\n### F\n\nf"


def test_a_deeper_heading_nests_and_a_same_or_shallower_one_pops() -> None:
    chunks = chunked(NESTED, min_chars=0)
    assert texts(chunks) == ["# A\n\na", "## B\n\nb", "### C\n\nc", "## D\n\nd", "# E\n\ne", "### F\n\nf"]
    assert paths(chunks) == [("A",), ("A", "B"), ("A", "B", "C"), ("A", "D"), ("E",), ("E", "F")]


def test_a_heading_starts_a_new_chunk_even_when_the_section_would_fit() -> None:
    document = "## One\n\n" + "first section. " * 20 + "\n\n## Two\n\nsecond section."
    chunks = chunked(document)
    assert [chunk.text.split("\n")[0] for chunk in chunks] == ["## One", "## Two"]
    assert paths(chunks) == [("One",), ("Two",)]


def test_a_tiny_chunk_takes_in_the_subsections_that_follow_under_its_own_path() -> None:
    document = "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n## Use\n\nCall it."
    assert chunked(document) == [Chunk(0, document, 0, len(document), ("Guide",))]


def test_text_before_the_first_heading_is_the_section_every_heading_nests_in() -> None:
    document = "Preamble.\n\n# Title\n\nBody."
    assert paths(chunked(document)) == [()]
    assert paths(chunked(document, min_chars=0)) == [(), ("Title",)]


def test_a_tiny_section_does_not_take_in_a_sibling_or_a_shallower_section() -> None:
    assert paths(chunked("## A\n\nshort.\n\n## B\n\nshort too.")) == [("A",), ("B",)]
    chunks = chunked("# A\n\n## B\n\nb.\n\n# C\n\nc.")
    assert texts(chunks) == ["# A\n\n## B\n\nb.", "# C\n\nc."]
    assert paths(chunks) == [("A",), ("C",)]


def test_a_heading_taken_in_goes_on_with_its_first_block_when_that_does_not_fit() -> None:
    intro, body = "Intro. " * 10, "Body. " * 15
    document = f"# A\n\n{intro.strip()}\n\n## B\n\n{body.strip()}"
    chunks = chunked(document, max_chars=120, min_chars=100)
    assert texts(chunks) == [f"# A\n\n{intro.strip()}", f"## B\n\n{body.strip()}"]
    assert paths(chunks) == [("A",), ("A", "B")]


def test_sibling_headings_taken_in_move_on_with_the_path_that_encloses_them() -> None:
    document = "# A\n\nintro\n\n## B\n\n## C\n\n" + "c" * 60
    chunks = chunked(document, max_chars=70, min_chars=50)
    assert texts(chunks) == ["# A\n\nintro\n\n## B", "## C\n\n" + "c" * 60]
    assert paths(chunks) == [("A",), ("A", "C")]


@pytest.mark.parametrize(
    ("document", "title"),
    [
        ("# Closed #####", "Closed"),
        ("## C#", "C#"),
        ("### ###", ""),
        ("   #   Spaced \t  out  ", "Spaced out"),
        ("Underlined\n==========", "Underlined"),
        ("Two lines\nunderlined\n---", "Two lines underlined"),
        ("# Windows\r", "Windows"),
    ],
)
def test_atx_and_setext_headings_give_their_text_to_the_path(document: str, title: str) -> None:
    (chunk,) = chunked(document + "\n\nbody")
    assert chunk.heading_path == (title,)


@pytest.mark.parametrize(
    "document",
    ["#hashtag", "####### seven", "    # indented code", "> # quoted", "```\n# code\n```", "para\n\n- - -"],
)
def test_what_only_looks_like_a_heading_is_not_one(document: str) -> None:
    assert paths(chunked(document + "\n\nbody", min_chars=0)) == [()]


def test_setext_underlines_level_one_and_two_and_a_rule_after_a_blank_line_is_no_heading() -> None:
    document = "Top\n===\n\nSub\n---\n\ntext\n\n---\n\nmore"
    assert paths(chunked(document, min_chars=0)) == [("Top",), ("Top", "Sub")]


def test_a_heading_is_cut_to_200_characters_and_a_path_holds_six_levels() -> None:
    deep = "".join(f"{'#' * level} {chr(64 + level) * 300}\n\n" for level in range(1, 7)) + "body"
    *_, last = chunked(deep, min_chars=0)
    assert last.heading_path == tuple(chr(64 + level) * MAX_HEADING_CHARS for level in range(1, 7))


# Code fences

FENCE = "```python\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n```"


def test_a_code_fence_is_never_split_when_it_fits() -> None:
    document = "# S\n\n" + "Words before it. " * 3 + "\n\n" + FENCE + "\n\nAfter."
    for max_chars in range(len(FENCE), len(document) + 1):
        chunks = chunked(document, max_chars=max_chars, min_chars=0)
        assert any(FENCE in chunk.text for chunk in chunks), max_chars


def test_a_fence_closes_only_with_its_own_character_at_least_as_long() -> None:
    document = "~~~~\n# one\n~~~\n```\n# two\n~~~~~\n# Three\n\nbody"
    chunks = chunked(document, min_chars=0)
    assert paths(chunks) == [(), ("Three",)]
    assert chunks[0].text == "~~~~\n# one\n~~~\n```\n# two\n~~~~~"


def test_a_backtick_fence_with_a_backtick_in_its_info_string_is_not_a_fence() -> None:
    assert paths(chunked("``` a`b\n# Heading\n\nbody", min_chars=0)) == [(), ("Heading",)]


def test_an_unclosed_fence_runs_to_the_end_of_the_document() -> None:
    document = "# S\n\n```\ncode\n\n# not a heading\n\n```python\nstill code"
    assert chunked(document) == [Chunk(0, document, 0, len(document), ("S",))]


def test_a_fence_longer_than_max_chars_is_cut_at_its_blank_lines() -> None:
    document = "```\n" + "\n\n".join(["x = 1\ny = 2"] * 20) + "\n```"
    chunks = chunked(document, max_chars=40, min_chars=0)
    assert len(chunks) > 1
    for chunk in chunks[:-1]:
        assert document[chunk.end : chunk.end + 2] == "\n\n"


# Lists, quotes, tables and packing

LIST = "- one\n  continued\n- two\n\n  loose paragraph of two\n1. three\n2) four"
QUOTE = "> quoted\n> > nested\nlazy line"
TABLE = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"


@pytest.mark.parametrize("block", [LIST, QUOTE, TABLE, FENCE])
def test_a_block_that_fits_moves_whole_to_the_next_chunk(block: str) -> None:
    before = "A paragraph before the block."
    chunks = chunked(f"{before}\n\n{block}", max_chars=max(len(before), len(block)) + 10, min_chars=0)
    assert texts(chunks) == [before, block]


def test_a_list_ends_at_an_unindented_line_after_a_blank_line() -> None:
    document = "- item\n\nparagraph after the list"
    assert texts(chunked(document, max_chars=26, min_chars=0)) == ["- item", "paragraph after the list"]


@pytest.mark.parametrize("fmt", [MD, TEXT])
def test_small_blocks_of_a_section_are_packed_up_to_max_chars(fmt: DocumentFormat) -> None:
    paragraph = "Thirty characters of text ok."
    document = "\n\n".join([paragraph] * 7)
    chunks = chunked(document, fmt, max_chars=100, min_chars=0)
    assert texts(chunks) == ["\n\n".join([paragraph] * 3)] * 2 + [paragraph]


def test_blank_lines_between_blocks_count_towards_the_size() -> None:
    chunks = chunked("a" + "\n" * 50 + "b", max_chars=50, min_chars=0)
    assert texts(chunks) == ["a", "b"]


# Cutting a block longer than max_chars


@pytest.mark.parametrize(
    ("document", "first"),
    [
        ("```\n" + "a" * 12 + "\n\n" + "b" * 6 + "\n" + "c" * 20 + "\n```", "```\n" + "a" * 12),  # blank line
        ("Aaaaaaaaaaa\nBb. Cc dd eeeeeeeeeeee", "Aaaaaaaaaaa"),  # a line end before a sentence
        ("Aaaa bbbbbb. Cc dd eeeeeeeeeeeeeee", "Aaaa bbbbbb."),  # a sentence before a space
        ("Aaaa bbbbbb cc dd eeeeeeeeeeeeeeee", "Aaaa bbbbbb cc dd"),  # the last space
        ("漢字" * 6 + "。" + "漢字" * 7, "漢字" * 6 + "。"),  # a full-width stop, no space
        ("a" * 50, "a" * 20),  # a hard cut
        ("Aa\n" + "b" * 40, "Aa\n" + "b" * 17),  # a boundary in the first half is passed over
        ("a" * 20 + " " + "b" * 10, "a" * 20),  # a space just past the window
        ("a" * 19 + ". " + "b" * 10, "a" * 19 + "."),  # a sentence ending on the last character
    ],
)
def test_a_long_block_is_cut_at_the_best_boundary_in_the_second_half_of_the_window(
    document: str, first: str
) -> None:
    max_chars = 30 if document.startswith("```") else 20
    assert chunked(document, max_chars=max_chars, min_chars=0)[0].text == first


def test_one_giant_token_is_cut_hard_at_max_chars() -> None:
    chunks = chunked("x" * 1000, max_chars=300)
    assert [len(chunk.text) for chunk in chunks] == [300, 300, 300, 100]


@pytest.mark.parametrize(
    "joined",
    [
        "👨\u200d👩\u200d👧",
        "e\u0301\u0302",
        "👍🏽",
        "❤\ufe0f",
        "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    ],
)
def test_a_hard_cut_does_not_split_a_joined_sequence(joined: str) -> None:
    for offset in range(len(joined) + 1):
        document = "a" * (20 - offset) + joined + "a" * 30
        chunks = chunked(document, max_chars=20, min_chars=0)
        assert any(joined in chunk.text for chunk in chunks), offset


def test_a_tiny_chunk_before_a_long_block_is_cut_together_with_it() -> None:
    chunks = chunked("# Title\n\n" + "word " * 100, max_chars=100, min_chars=20)
    assert chunks[0].text.startswith("# Title\n\nword") and len(chunks[0].text) > 90
    assert paths(chunks) == [("Title",)] * len(chunks)


def test_the_last_piece_of_a_long_block_is_packed_with_what_follows() -> None:
    chunks = chunked(("word " * 30).strip() + "\n\nnext", max_chars=100, min_chars=0)
    assert chunks[-1].text.endswith("word\n\nnext")


def test_a_piece_after_a_line_end_keeps_its_indentation() -> None:
    document = "```\n" + "\n".join(f"    line {i:02}" for i in range(20)) + "\n```"
    assert all(chunk.text.startswith(("```", "    line")) for chunk in chunked(document, max_chars=60))


# Plain text and line endings


def test_plain_text_reads_no_markdown_only_paragraphs() -> None:
    document = "# Not a heading\n\n```\ncode\n\nmore\n```\n\n- not a list"
    assert chunked(document, TEXT) == [Chunk(0, document, 0, len(document), ())]
    assert texts(chunked(document, TEXT, max_chars=20, min_chars=0)) == [
        "# Not a heading",
        "```\ncode\n\nmore\n```",
        "- not a list",
    ]


def test_crlf_line_endings_read_as_lf() -> None:
    document = "# A\r\n\r\ntext\r\n\r\n```\r\ncode\r\n\r\n# not\r\n```\r\n\r\n## B\r\n\r\nmore\r\n"
    chunks = chunked(document, min_chars=0)
    assert texts(chunks) == ["# A\r\n\r\ntext\r\n\r\n```\r\ncode\r\n\r\n# not\r\n```", "## B\r\n\r\nmore"]
    assert paths(chunks) == [("A",), ("A", "B")]


# Properties over every shape

EXAMPLES = [NESTED, FENCE, LIST, QUOTE, TABLE, "Top\n===\n\nSub\n---\n\ntext\n\n---\n\nmore"]

HOSTILE = {
    "10k headings": "# heading\n",
    "headings six deep": "# a\n## b\n### c\n#### d\n##### e\n###### f\n",
    "one giant token": "abcdefghij",
    "only emoji": "😀",
    "emoji joined by zero-width joiners": "👨\u200d👩\u200d👧\u200d👦",
    "only combining marks": "\u0301",
    "block quotes 10k deep": "> " * 10_000 + "deep\n",
    "lists 10k deep": "- " * 10_000 + "item\n",
    "lists nested by indentation": "".join("  " * depth + "- item\n" for depth in range(500)),
    "unclosed fences": "```python\n",
    "fence after fence": "```\n",
    "one very long line": "lorem ipsum dolor sit amet ",
    "crlf line endings": "A line of text.\r\n\r\n",
    "only newlines": "\n",
    "short paragraphs": "A short paragraph.\n\n",
    "table rows": "| a | b |\n",
    "no spaces, full-width stops": "漢字。",
}
SMALL = 16 * 1024
LARGE = 1024 * 1024
# Linear is 1 per byte; the slack covers caches and allocation growing with the size, while
# quadratic work would be about 64.
MAX_PER_BYTE_RATIO = 8.0
REMEASURES = 3
TOKENS = ["#", "## ", "```", "~~~", "> ", "- ", "1. ", "---", "===", "|", "\n", "\r\n", "\n\n", " ", "    "]
TOKENS += ["word", "a.", ". ", "😀", "\u200d", "\u0301", "\t", "漢。"]


@pytest.mark.parametrize(("max_chars", "min_chars"), [(1, 0), (7, 3), (80, 20), (1600, 200)])
@pytest.mark.parametrize("fmt", [MD, TEXT])
@pytest.mark.parametrize("document", EXAMPLES + [of_size(unit, SMALL) for unit in HOSTILE.values()])
def test_every_chunk_is_the_documents_own_text_in_order_and_within_bounds(
    document: str, fmt: DocumentFormat, max_chars: int, min_chars: int
) -> None:
    chunked(document, fmt, max_chars, min_chars)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(TOKENS), max_size=200).map("".join),
    st.sampled_from([MD, TEXT]),
    st.integers(1, 64),
    st.integers(0, 64),
)
def test_any_text_chunks_into_bounded_spans_covering_every_visible_character(
    document: str, fmt: DocumentFormat, max_chars: int, min_chars: int
) -> None:
    chunked(document, fmt, max_chars, min_chars)


def test_a_hostile_document_cannot_make_every_chunk_carry_a_long_heading() -> None:
    document = "# " + "h" * SMALL + "\n\n" + "body. " * 1000
    assert {chunk.heading_path for chunk in chunked(document)} == {("h" * MAX_HEADING_CHARS,)}


# Plain text runs the same reader and packer, every line a paragraph line: these shapes cover
# what it reads differently (one 4 MiB paragraph of short lines) and its packing.
PLAIN_HOSTILE = [
    "10k headings",
    "one giant token",
    "fence after fence",
    "crlf line endings",
    "short paragraphs",
]


@pytest.mark.parametrize(
    ("shape", "fmt"), [(shape, MD) for shape in HOSTILE] + [(shape, TEXT) for shape in PLAIN_HOSTILE]
)
def test_64_times_the_document_costs_about_64_times_the_time(shape: str, fmt: DocumentFormat) -> None:
    def run(text: str) -> object:
        return chunk_document(text, fmt)

    small, large = of_size(HOSTILE[shape], SMALL), of_size(HOSTILE[shape], LARGE)
    run(small)  # warm-up
    small_time, large_time = fastest(run, small, 3), fastest(run, large, 3)
    for _ in range(REMEASURES):
        if large_time <= MAX_PER_BYTE_RATIO * small_time * LARGE / SMALL:
            break
        small_time = min(small_time, fastest(run, small, 5))  # a burst of load during one of them
        large_time = min(large_time, fastest(run, large, 3))
    per_byte = large_time / small_time / (LARGE / SMALL)
    assert per_byte <= MAX_PER_BYTE_RATIO, f"{shape}: {per_byte:.1f}x the cost per byte at 1 MiB"


def test_cutting_stops_at_the_chunk_past_max_chunks_without_reading_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines_read = 0
    read_line = chunking._Reader.line

    def counted(reader: chunking._Reader, start: int, line: str) -> None:
        nonlocal lines_read
        lines_read += 1
        read_line(reader, start, line)

    monkeypatch.setattr(chunking._Reader, "line", counted)
    tiny_sections = "a\n=\n" * 100_000
    assert len(chunk_document(tiny_sections[: 4 * 10], MD, max_chunks=10)) == 10
    with pytest.raises(TooManyChunks):
        chunk_document(tiny_sections, MD, max_chunks=10)
    assert lines_read < 100  # of 200,000: the first call's 20, then a few past the 10th chunk
