"""A document cut into chunks for agent knowledge. Each chunk is a span of the document (its
text is `document[start:end]`, so it can always be traced back), at most `max_chars` long,
never whitespace only, carrying the markdown headings that enclose it.

- **Blocks.** Lines are read once, split at "\\n" (a "\\r" before it is trailing whitespace, so
  CRLF reads as LF). Markdown blocks: a paragraph (up to a blank line or another block; a
  table is a paragraph of rows), a list (its items, their indented or lazy continuation
  lines and the blank lines between them), a block quote (with lazy lines), a fenced code
  block (``` or ~~~, to a closing fence at least as long or, unclosed, to the end of the
  document), a thematic break, and a heading: ATX (`#`..`######`) or setext (a paragraph
  underlined with = or -). A fence indented under a list item is part of the list. Plain
  text has paragraphs only, and no headings.
- **Packing.** Consecutive blocks share a chunk while the span from the first one's start to
  the last one's end fits in `max_chars`. A block that fits is never split, so a code fence
  that fits stays whole.
- **Headings.** A heading starts a new chunk, with one exception: a chunk still shorter than
  `min_chars` takes in the heading of a subsection of its own section (text before the first
  heading is the section every heading nests in), so a title and a line of intro are not left
  alone. The chunk keeps its own section's path, the headings that enclose all of it. If the
  subsection's first block then does not fit, the headings taken in move on with it to the
  next chunk: a heading taken in never ends a chunk. A sibling or shallower heading always
  starts a new chunk, so a chunk never holds two sections side by side.
- **Cutting.** A block longer than `max_chars` is cut into pieces. Each cut is the best
  boundary in the second half of the window, in this order: a blank line, a line end, a
  sentence end (". ", "! ", "? ", or a full-width 。！？), whitespace, and finally a hard cut at
  `max_chars`. A hard cut moves back a few characters rather than fall before a joiner, a
  combining mark or an emoji modifier. The last piece stays open for the blocks after it, and
  a chunk shorter than `min_chars` just before the long block is cut together with it rather
  than left on its own.
- **Edges.** A chunk never starts or ends with blank lines or trailing whitespace: the span
  moves in, and the text is still the document's. A chunk that starts a line keeps that
  line's indentation.
- **Bounds.** A heading in a path is its text with runs of whitespace read as one space, cut
  to 200 characters, and a path keeps its innermost 6 levels, so a hostile document cannot
  make every chunk carry megabytes. `max_chunks` stops the cutting at the chunk past it
  (`TooManyChunks`): a document of tiny sections ("a\\n=\\n" over and over: 4 bytes a chunk)
  costs the caller at most that many chunks of work and memory, whatever its size.

Linear in time and memory for every shape of input. There is one pass over the lines, the
only patterns match a single character, and each cut searches a window of `max_chars`, after
which the next piece starts at least half a window further on."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum, StrEnum

MAX_HEADING_CHARS = 200
MAX_HEADING_LEVELS = 6

_VISIBLE = re.compile(r"\S")
_SPACE = re.compile(r"\s")
_SENTENCE_ENDS = (". ", "! ", "? ", "。", "！", "？")
_STARTERS = frozenset("#`~>-*_+0123456789")  # the first characters of a markdown block
_AFTER_MARKER = ("", " ", "\t", "\r")  # what may follow a list marker or the #s of a heading
_CLUSTER_REACH = 32  # how far back a hard cut looks for a boundary between two characters
_JOINER = "\u200d"
_MARKS = ("Mn", "Mc", "Me")  # combining marks, variation selectors among them


class TooManyChunks(ValueError):
    """The document cuts into more than the `max_chunks` it was given."""


class DocumentFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int  # 0-based position in the document
    text: str  # document[start:end]
    start: int  # offsets are Python str indices (code points) into the document
    end: int
    heading_path: tuple[str, ...]  # the enclosing headings, outermost first; () for plain text


def chunk_document(
    text: str, fmt: DocumentFormat, max_chars: int = 1600, min_chars: int = 200, max_chunks: int | None = None
) -> list[Chunk]:
    """The chunks of `text` in document order; [] when it is empty or whitespace only.
    Raises TooManyChunks as soon as there would be more than `max_chunks`."""
    if max_chars < 1 or min_chars < 0:
        raise ValueError(f"max_chars must be positive and min_chars not negative: {max_chars}, {min_chars}")
    if _VISIBLE.search(text) is None:
        return []
    packer = _Packer(text, max_chars, min_chars, max_chunks)
    reader = _Reader(text, packer, markdown=fmt == DocumentFormat.MARKDOWN)
    for start, line in _lines(text):
        reader.line(start, line)
    reader.close()
    return packer.chunks()


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(start, line) split at "\\n", one at a time: a cut stopped early by `max_chunks` has
    not split the rest (a million one-character lines are ~50 MB as a list)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield start, text[start:end]
        start = end + 1
    yield start, text[start:]


class _Kind(Enum):
    """What a line starts (or, as the reader's state, the block being read)."""

    TEXT = "text"  # a paragraph
    HEADING = "heading"
    FENCE = "fence"
    QUOTE = "quote"
    ITEM = "item"  # a list
    RULE = "rule"


class _Reader:
    """Lines in, blocks and headings out to the packer."""

    def __init__(self, text: str, packer: _Packer, *, markdown: bool) -> None:
        self._text = text
        self._packer = packer
        self._markdown = markdown
        self._open: _Kind | None = None  # the block being read
        self._start = 0  # where it starts (a line start)
        self._first = 0  # its first visible character
        self._last, self._last_start = "", 0  # its last non-blank line and where that starts
        self._blank = False  # a blank line since the last line of the open list
        self._fence = ""  # the open fence's run of ` or ~

    def line(self, start: int, line: str) -> None:
        if self._open is _Kind.FENCE:
            self._in_fence(start, line)
            return
        body = line.lstrip()
        if not body:
            self._blank_line()
            return
        indent = len(line) - len(body)
        if self._markdown and self._open is _Kind.TEXT and indent < 4 and _is_underline(body):
            self._setext(start, line, body)
            return
        kind = _kind_of(body, indent) if self._markdown else _Kind.TEXT
        if self._open is not None:
            if self._continues(kind, indent):
                self._last, self._last_start, self._blank = line, start, False
                return
            self.close()
        self._begin(kind, start, line, body)

    def close(self) -> None:
        """Ends the open block, if any, at the end of its last non-blank line."""
        if self._open is not None:
            self._packer.block(self._start, self._last_start + len(self._last.rstrip()))
            self._open = None

    def _continues(self, kind: _Kind, indent: int) -> bool:
        if self._open is _Kind.TEXT:
            return kind is _Kind.TEXT
        if self._open is _Kind.ITEM:  # a lazy line only right after the item's text
            return kind is _Kind.ITEM or indent > 0 or (kind is _Kind.TEXT and not self._blank)
        if self._open is _Kind.QUOTE:  # a blank line has closed it, so a text line is lazy
            return kind in (_Kind.QUOTE, _Kind.TEXT)
        return False

    def _begin(self, kind: _Kind, start: int, line: str, body: str) -> None:
        end = start + len(line.rstrip())
        if kind is _Kind.HEADING:
            level = _atx_level(body)
            self._packer.heading(level, _atx_title(body, level), start, end)
        elif kind is _Kind.RULE:
            self._packer.block(start, end)
        else:
            self._fence = _fence_of(body) if kind is _Kind.FENCE else ""
            self._open, self._start, self._first = kind, start, end - len(body.rstrip())
            self._last, self._last_start, self._blank = line, start, False

    def _blank_line(self) -> None:
        if self._open is _Kind.ITEM:  # a list goes on if an item or an indented line follows
            self._blank = True
        else:
            self.close()

    def _in_fence(self, start: int, line: str) -> None:
        body = line.lstrip()
        if not body:
            return
        self._last, self._last_start = line, start
        closing = len(line) - len(body) < 4 and body.startswith(self._fence)
        if closing and not body.lstrip(self._fence[0]).strip():
            self.close()

    def _setext(self, start: int, line: str, body: str) -> None:
        """The open paragraph, underlined, is a heading: = level 1, - level 2."""
        raw = self._text[self._first : min(start, self._first + 4 * MAX_HEADING_CHARS)]
        level = 1 if body[0] == "=" else 2
        self._packer.heading(level, _heading_text(raw), self._start, start + len(line.rstrip()))
        self._open = None


def _kind_of(body: str, indent: int) -> _Kind:
    """The kind of block a markdown line starts; `body` is the line without its indentation."""
    if indent >= 4:  # indented code, or a continuation line
        return _Kind.TEXT
    first = body[0]
    if first not in _STARTERS:  # most lines: decided without a call
        return _Kind.TEXT
    if first == "#":
        return _Kind.HEADING if _atx_level(body) else _Kind.TEXT
    if first in "`~":
        return _Kind.FENCE if _fence_of(body) else _Kind.TEXT
    if first == ">":
        return _Kind.QUOTE
    if first in "-*_" and _is_rule(body):
        return _Kind.RULE
    return _Kind.ITEM if _is_item(body) else _Kind.TEXT


def _atx_level(body: str) -> int:
    """1 to 6 for an ATX heading, else 0."""
    head = body[:8]
    level = len(head) - len(head.lstrip("#"))
    return level if level <= 6 and body[level : level + 1] in _AFTER_MARKER else 0


def _atx_title(body: str, level: int) -> str:
    title = body[level:].strip()
    unclosed = title.rstrip("#")  # an optional closing run of #s, after a space
    if not unclosed or unclosed[-1] in " \t":
        title = unclosed.rstrip()
    return _heading_text(title[: 4 * MAX_HEADING_CHARS])


def _heading_text(raw: str) -> str:
    return " ".join(raw.split())[:MAX_HEADING_CHARS]


def _fence_of(body: str) -> str:
    """The run of 3 or more ` or ~ opening a code fence, else ""."""
    mark = body[0]
    run = len(body) - len(body.lstrip(mark))
    if run < 3 or (mark == "`" and "`" in body[run:]):  # a ``` fence's info string has no `
        return ""
    return body[:run]


def _is_underline(body: str) -> bool:
    return body[0] in "=-" and not body.rstrip().strip(body[0])


def _is_rule(body: str) -> bool:
    marks = body.replace(" ", "").replace("\t", "").rstrip()
    return len(marks) >= 3 and not marks.strip(body[0])


def _is_item(body: str) -> bool:
    if body[0] in "-*+":
        return body[1:2] in _AFTER_MARKER
    head = body[:10]
    digits = len(head) - len(head.lstrip("0123456789"))
    delimiter, after = body[digits : digits + 1], body[digits + 1 : digits + 2]
    return 0 < digits < 10 and delimiter in (".", ")") and after in _AFTER_MARKER


@dataclass(frozen=True, slots=True)
class _Tail:
    """The headings that end the open chunk, taken in under a tiny start: where they begin,
    where the chunk ended before them, and the path and level of the first of them."""

    before: int
    start: int
    path: tuple[str, ...]
    level: int


class _Packer:
    """Blocks and headings in, chunks out. At most one chunk is open: the blocks packed so far,
    with the path and the level of the section it started in."""

    def __init__(self, text: str, max_chars: int, min_chars: int, max_chunks: int | None) -> None:
        self._text = text
        self._max = max_chars
        self._min = min_chars
        self._max_chunks = max_chunks
        self._chunks: list[Chunk] = []
        self._levels: list[int] = []  # of the enclosing headings, outermost first
        self._titles: list[str] = []
        self._path: tuple[str, ...] = ()
        self._level = 0  # of the innermost heading; 0 before the first
        self._start = self._end = -1  # the open chunk's span; -1: none is open
        self._open_path: tuple[str, ...] = ()
        self._open_level = 0
        self._tail: _Tail | None = None

    def heading(self, level: int, title: str, start: int, end: int) -> None:
        levels, titles = self._levels, self._titles
        while levels and levels[-1] >= level:
            levels.pop()
            titles.pop()
        levels.append(level)
        titles.append(title)
        self._path, self._level = tuple(titles[-MAX_HEADING_LEVELS:]), level
        if self._tiny() and level > self._open_level and self._fits(end):
            if self._tail is None or level <= self._tail.level:  # else it nests in the tail's
                self._tail = _Tail(self._end, start, self._path, level)
            self._end = end
        else:
            self._tail = None
            self._flush()
            self._add(start, end)

    def block(self, start: int, end: int) -> None:
        if self._tail is not None and not self._fits(end):
            self._detach(self._tail)  # headings go on with their section's first block
        self._tail = None
        self._add(start, end)

    def chunks(self) -> list[Chunk]:
        self._flush()
        return self._chunks

    def _add(self, start: int, end: int) -> None:
        if self._fits(end):
            self._end = end
        elif end - start <= self._max:
            self._flush()
            self._begin(start, end, self._path, self._level)
        else:
            self._cut(start, end)

    def _detach(self, tail: _Tail) -> None:
        end, self._end = self._end, tail.before
        self._flush()
        self._begin(tail.start, end, tail.path, tail.level)

    def _cut(self, start: int, end: int) -> None:
        """A block too long for one chunk, in pieces; the last one stays open."""
        path, level = self._path, self._level
        # A tiny open chunk goes into the first piece (its cut falls past half a window).
        if self._tiny() and self._end - self._start < self._max // 2:
            start, path, level = self._start, self._open_path, self._open_level
            self._start = -1
        for piece_start, piece_end in _pieces(self._text, start, end, self._max):
            self._flush()
            self._begin(piece_start, piece_end, path, level)
            path, level = self._path, self._level

    def _fits(self, end: int) -> bool:
        return self._start >= 0 and end - self._start <= self._max

    def _tiny(self) -> bool:
        return self._start >= 0 and self._end - self._start < self._min

    def _begin(self, start: int, end: int, path: tuple[str, ...], level: int) -> None:
        self._start, self._end, self._open_path, self._open_level = start, end, path, level

    def _flush(self) -> None:
        if self._start >= 0:
            if self._max_chunks is not None and len(self._chunks) >= self._max_chunks:
                raise TooManyChunks(f"more than {self._max_chunks} chunks")
            text = self._text[self._start : self._end]
            self._chunks.append(Chunk(len(self._chunks), text, self._start, self._end, self._open_path))
            self._start = -1


def _pieces(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """`text[start:end]` as trimmed spans of at most `max_chars`, none whitespace only."""
    pos: int | None = start
    while pos is not None and end - pos > max_chars:
        cut = _cut_at(text, pos, max_chars)
        piece = _trimmed(text, pos, cut)
        if piece is not None:
            yield piece
        pos = _next_start(text, cut, end)
    if pos is not None and (piece := _trimmed(text, pos, end)) is not None:
        yield piece


def _cut_at(text: str, pos: int, max_chars: int) -> int:
    """Where the piece starting at `pos` ends: the best boundary in the second half of the
    window. The piece is text[pos:cut], so a boundary character at the window's end fits."""
    floor, limit = pos + max(1, max_chars // 2), pos + max_chars
    blank = max(text.rfind("\n\n", floor, limit + 2), text.rfind("\n\r\n", floor, limit + 3))
    if blank >= 0:
        return blank
    line_end = text.rfind("\n", floor, limit + 1)
    if line_end >= 0:
        return line_end
    sentence = max(text.rfind(end, floor, limit + len(end) - 1) for end in _SENTENCE_ENDS)
    if sentence >= 0:
        return sentence + 1  # after the mark
    space = _last_space(text, floor, limit)
    return space if space >= 0 else _hard_cut(text, floor, limit)


def _last_space(text: str, floor: int, limit: int) -> int:
    """The last whitespace in text[floor:limit + 1], or -1: searched in the window reversed,
    as a regex only searches forwards."""
    found = _SPACE.search(text[floor : limit + 1][::-1])
    return -1 if found is None else limit - found.start()


def _hard_cut(text: str, floor: int, limit: int) -> int:
    for cut in range(limit, max(floor, limit - _CLUSTER_REACH), -1):
        if not _joined(text[cut - 1], text[cut]):
            return cut
    return limit  # a run of joined characters longer than the reach: cut it anyway


def _joined(before: str, after: str) -> bool:
    """Whether a cut between the two would split what a reader sees as one character."""
    return (
        _JOINER in (before, after)
        or unicodedata.category(after) in _MARKS
        or "\U0001f3fb" <= after <= "\U0001f3ff"  # emoji skin tones
        or "\U000e0020" <= after <= "\U000e007f"  # emoji tag sequences (subdivision flags)
    )


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    """text[start:end] without blank lines or whitespace at its edges; None if nothing is left.
    A span starting a line keeps the indentation of its first visible line."""
    found = _VISIBLE.search(text, start, end)
    if found is None:
        return None
    first = found.start()
    newline = text.rfind("\n", start, first)
    if newline >= 0:
        start = newline + 1
    elif start > 0 and text[start - 1] != "\n":
        start = first  # mid-line: drop the spaces the cut left
    return start, first + len(text[first:end].rstrip())


def _next_start(text: str, cut: int, end: int) -> int | None:
    """Where the piece after a cut starts: at its line if the cut ended one, else at its first
    visible character; None if only whitespace is left."""
    found = _VISIBLE.search(text, cut, end)
    if found is None:
        return None
    newline = text.rfind("\n", cut, found.start())
    return newline + 1 if newline >= 0 else found.start()
