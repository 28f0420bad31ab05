"""How text is read into words, once for every reader: lexical recall (`store/lexical.py`),
excerpts and passage scores (`domain/excerpts.py`), memory search and the extractive
summarizer (`summarize/text.py`). Pure, deterministic and linear in the text read.

The rules, and why each was chosen where the readers used to differ:

- **Folding.** `fold` lower-cases, strips accents from Latin and Greek letters ("Café" ->
  "cafe"; Cyrillic is left alone, where "й" is a letter of its own, not an accented "и") and
  unifies the curly apostrophes with the straight one ("I’m" -> "i'm"), one character for
  one, so offsets into the folded text are offsets into the original (the summarizer cuts
  sentences by them). Both sides of every in-memory comparison (query and
  messages, sentence and sentence) are folded alike, so "cafe" finds "café". Lexical recall is
  the one exception: it keeps accents as typed (`terms(..., keep_accents=True)`), because the
  text it matches is folded by the database, not by us: SQLite's unicode61 tokenizer strips
  accents on both sides anyway, while PostgreSQL's 'english' configuration keeps them in the
  stored tsvector, where a folded query word would no longer match.
- **Words.** Every punctuation mark but the apostrophe separates words, then a split on
  spaces (several times faster than a regex, and messages are read on every recalling turn);
  an apostrophe inside a word stays ("i'm", "don't", "caroline's"), at its edges it goes
  ("'quoted'" -> "quoted"). Two of the three readers kept inner apostrophes, and the
  summarizer's first-person cues need "i'm" whole; splitting contractions instead made
  fragments ("don", "ve", "ll") into query words. Where the text is matched by a database's
  own tokenizer (which splits at apostrophes), the lexical adapter cuts what reaches SQL into
  letters-and-digits pieces: that is the index's rule, not a different reading of the query.
- **Stop words.** One list, `STOPWORDS`: function words (articles, pronouns, auxiliaries,
  prepositions, conjunctions, question words), their contractions, and the interjections
  "yes", "ok", "oh". They carry no topic and hold the longest posting lists, while BM25's idf
  already weighs everything else down by how common it is. It is the larger of the two query
  lists used before (excerpts' 80 words; lexical recall's 75 are all in it) plus the
  contractions, so "i'm" is now dropped by every reader (lexical recall dropped it as two
  one-letter pieces, excerpts kept it). A query word (`terms`) is a word of two characters or
  more not in the list.
- **The summarizer's superset.** `SUMMARY_STOPWORDS` adds to `STOPWORDS` chat fillers ("yeah",
  "lol", "awesome"), vague nouns and verbs ("thing", "stuff", "know", "think", "say"), degree
  adverbs and single letters. The summarizer ranks sentences by how many content words they
  hold, and without these a chatty line ("yeah I think that's really cool") outranks one that
  says something. A searcher, though, may ask exactly about them ("what did I say was
  awesome?"), and BM25 weighs them by rarity, so query matching keeps the small list.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable

_FUNCTION_WORDS = """
a about after all also am an and any are as at be been but by can could did do does for from had
has have he her him his how i if in into is it its just me my no not of on or our she so some
than that the their them then there they this to too up us was we were what when where which who
why will with would you your yes ok oh
aren't can't couldn't didn't doesn't don't hadn't hasn't haven't he'd he'll he's here's how's i'd
i'll i'm i've isn't it's let's she'd she'll she's that's there's they'd they'll they're they've
wasn't we'd we'll we're we've weren't what's when's where's who's why's won't wouldn't you'd
you'll you're you've
"""
_SUMMARY_ONLY_WORDS = """
above again against always because before being below between both cannot doing down during each
even ever every few further get gets got having here hers herself himself let like more most much
must myself never nor now off once only other ought ours ourselves out over own same should such
itself theirs themselves these those though through under until very while whom yours yourself
yourselves
yeah yep okay ah wow hey hi hello thanks thank please sure great good nice cool awesome lol haha
really pretty totally quite kinda gonna wanna gotta thing things stuff lot lots one anything
something everything see know think say said says tell told well way back still yet maybe forget
"""
STOPWORDS = frozenset(_FUNCTION_WORDS.split())
"""Words that never make a query or a content word: the one list every reader uses."""
SUMMARY_STOPWORDS = STOPWORDS | frozenset(_SUMMARY_ONLY_WORDS.split()) | frozenset(string.ascii_lowercase)
"""`STOPWORDS` and the words the summarizer's sentence scoring also leaves out (see above)."""

# Every punctuation mark but the apostrophe separates words (curly apostrophes are folded to
# the straight one first).
_SEPARATORS = str.maketrans(dict.fromkeys(string.punctuation.replace("'", "") + "…“”–—•", " "))
_APOSTROPHES = {ord("’"): "'", ord("‘"): "'"}
# Accented letters of the alphabets people write chat in, lower and upper case, mapped to their
# base letter (one character each: offsets are kept). Built once; a character not here is kept.
_LETTER_RANGES = ((0x00C0, 0x0250), (0x0370, 0x0400), (0x1E00, 0x2000))


def _base_letters() -> dict[int, str]:
    table: dict[int, str] = dict(_APOSTROPHES)
    for low, high in _LETTER_RANGES:
        for code in range(low, high):
            parts = unicodedata.normalize("NFD", chr(code))
            marks = parts[1:]
            base = parts[0].lower()  # "İ" lowers to two characters: it reaches here upper case
            if (
                marks
                and len(base) == 1
                and not unicodedata.combining(base)
                and all(map(unicodedata.combining, marks))
            ):
                table[code] = base
    return table


_BASE_LETTERS = _base_letters()


def lower(text: str) -> str:
    """Lower case that keeps every offset (the few characters that lower to two are left
    alone), curly apostrophes made straight."""
    lowered = _lowered(text)
    if lowered.isascii() or not _curly(lowered):
        return lowered
    return lowered.translate(_APOSTROPHES)


def fold(text: str) -> str:
    """`lower`, and accented letters to their base letter ("é" -> "e"): offsets are kept."""
    lowered = _lowered(text)
    if lowered.isascii() or (unicodedata.is_normalized("NFD", lowered) and not _curly(lowered)):
        return lowered  # nothing to fold (a quick test in C that emoji and most scripts pass)
    return lowered.translate(_BASE_LETTERS)


def _lowered(text: str) -> str:
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(char.lower() if len(char.lower()) == 1 else char for char in text)


def _curly(text: str) -> bool:
    return "’" in text or "‘" in text


def split_words(folded: str) -> list[str]:
    """The words of already folded text, apostrophes kept inside a word and dropped at its
    edges."""
    spaced = folded.translate(_SEPARATORS)
    if "'" not in spaced:
        return spaced.split()
    return [word for word in (piece.strip("'") for piece in spaced.split()) if word]


def words(text: str, *, keep_accents: bool = False) -> list[str]:
    """Every word of `text`, folded (accents kept if asked), in order."""
    return split_words(lower(text) if keep_accents else fold(text))


def only_terms(folded: Iterable[str]) -> list[str]:
    """The folded words that can match a query: two characters or more, not stop words.
    One pass without a call per word: it runs over every word of every turn."""
    return [word for word in folded if len(word) > 1 and word not in STOPWORDS]


def is_term(word: str) -> bool:
    return bool(only_terms((word,)))


def terms(text: str, *, keep_accents: bool = False) -> list[str]:
    """The words of `text` that a query matches by, in order (repeats kept)."""
    return only_terms(words(text, keep_accents=keep_accents))


# Letters and digits only, as database tokenizers split a word (and so no query syntax).
_PIECE = re.compile(r"[^\W_]{2,}")


def term_pieces(word: str) -> list[str]:
    """A term (from `terms` or `only_terms`) as an index holds it: whole when it is letters and
    digits, else its letters-and-digits pieces that are terms ("caroline's" -> "caroline")."""
    if word.isalnum():
        return [word]
    return [piece for piece in _PIECE.findall(word) if is_term(piece)]
