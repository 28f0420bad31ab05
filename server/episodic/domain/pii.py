"""PII detection and redaction: emails, phone numbers, payment cards, IBANs, US SSNs, IP addresses and
secrets. Pure. Precompiled regexes find candidates and validators confirm them (Luhn, ISO 13616 mod-97,
SSN allocation rules, `ipaddress`, entropy), so a lookalike that fails its check is left alone.

Measured on tests/data/pii_labelled.jsonl by `episodic eval-pii`; the decisions on ambiguous cases are
in the "note" field of that file.

Speed: each pattern starts with a literal or a character class, with its boundary look-behinds after the
first character, so the regex engine skips ahead instead of trying every position; kinds made of digits
are only searched near digits, and the others only when their anchor ("@", a keyword) is present; `redact`
searches again only around the placeholders it put in."""

from __future__ import annotations

import base64
import bisect
import enum
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from episodic.domain.model import JsonValue
from episodic.domain.pii_patterns import CARD_ISSUERS, FILE_EXTENSIONS, IBAN_LENGTHS, TOKEN_PATTERNS


class PiiKind(enum.StrEnum):
    EMAIL = "EMAIL"
    PHONE = "PHONE"
    CARD = "CARD"
    IBAN = "IBAN"
    SSN = "SSN"
    IP = "IP"
    SECRET = "SECRET"

    @property
    def placeholder(self) -> str:
        return f"[{self.value}]"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: PiiKind
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    counts: dict[PiiKind, int]  # only the kinds found


def find_pii(text: str) -> list[Finding]:
    """Non-overlapping findings in text order. Kinds claim spans in priority order, longest first."""
    return _find(text, _Scope([(0, len(text))], _digit_windows(text)))


def _find(text: str, scope: _Scope) -> list[Finding]:
    claims = _Claims(len(text))
    for kind, detect in _DETECTORS:
        for candidate in sorted(detect(text, scope), key=lambda c: (c.start - c.end, c.start)):
            claims.claim(kind, candidate)
    return claims.findings()


def redact(text: str) -> Redaction:
    """Replaces each finding by its kind's placeholder, then searches the result again until nothing new
    is found: a value glued to another one (`a@example.com+44 20 7946 0958`) or read as part of a longer
    candidate only shows once its neighbour is a placeholder. So redacting twice gives what redacting once
    gave (for up to `_MAX_PASSES` values glued in a chain)."""
    counts: Counter[PiiKind] = Counter()
    findings = find_pii(text)
    for _ in range(_MAX_PASSES):
        if not findings:
            break
        counts.update(f.kind for f in findings)
        text, placeholders = _replace(text, findings)
        findings = _find(text, _Scope.around(text, placeholders))  # only a placeholder's neighbours change
    return Redaction(text, dict(counts))


# Each pass can reveal one more of a chain of glued values; a longer chain is adversarial, and the bound
# keeps its cost linear.
_MAX_PASSES = 8


def _replace(text: str, findings: list[Finding]) -> tuple[str, list[Window]]:
    """The text with placeholders, and where they are in it."""
    parts: list[str] = []
    placeholders: list[Window] = []
    last = length = 0
    for finding in findings:
        parts += [text[last : finding.start], finding.kind.placeholder]
        length += finding.start - last
        placeholders.append((length, length + len(finding.kind.placeholder)))
        length += len(finding.kind.placeholder)
        last = finding.end
    parts.append(text[last:])
    return "".join(parts), placeholders


def redact_json(value: JsonValue) -> JsonValue:
    """Every string inside value redacted; mapping keys are kept as they are."""
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, Mapping):
        return {key: redact_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item) for item in value]
    return value


class _Candidate(NamedTuple):
    start: int
    end: int
    valid: bool = True  # False: a lookalike (IBAN-shaped, bad checksum) that only blocks weaker kinds


Window = tuple[int, int]


class _Scope(NamedTuple):
    """Where to search: any kind within `everywhere`, the kinds made of digits within `digits`."""

    everywhere: list[Window]
    digits: list[Window]

    @staticmethod
    def around(text: str, placeholders: list[Window]) -> _Scope:
        """The neighbourhoods of placeholders, widened to a sentence or line end, which no value crosses."""
        stops, newlines = _Marks(text, ". "), _Marks(text, "\n")
        windows: list[Window] = []
        for start, end in placeholders:
            reach_back = max(0, start - _REACH)
            start = max(stops.last_within(reach_back), newlines.last_within(reach_back)) + 1
            end = min(stops.first_from(end + _REACH) + 2, newlines.first_from(end + _REACH) + 1)
            if windows and start <= windows[-1][1]:
                start = windows.pop()[0]
            windows.append((start, end))
        return _Scope(windows, windows)


# The farthest a placeholder can change what is found: an assignment's key and quoted value (up to 256
# characters) reaching over it, plus an SSN cue's reach.
_REACH = 320


class _Marks:
    """Where a short mark occurs in a text, found once, so that the marks nearest to each of many
    placeholders cost a bisection rather than a scan (which made many findings quadratic)."""

    def __init__(self, text: str, mark: str) -> None:
        self._mark = mark
        self._length = len(text)
        self._at = [found.start() for found in re.finditer(re.escape(mark), text)]

    def last_within(self, end: int) -> int:
        """The start of the last mark that ends by `end`, or -1: `text.rfind(mark, 0, end)`."""
        i = bisect.bisect_right(self._at, end - len(self._mark))
        return self._at[i - 1] if i else -1

    def first_from(self, start: int) -> int:
        """The start of the first mark at or after `start`, or the text's length."""
        i = bisect.bisect_left(self._at, max(0, start))
        return self._at[i] if i < len(self._at) else self._length


Detector = Callable[[str, _Scope], Iterator[_Candidate]]


class _Claims:
    """Non-overlapping spans. Which characters are claimed is kept as one byte each, so a claim costs
    its own length (inserting into a sorted list cost the number of claims, quadratic in all)."""

    def __init__(self, length: int) -> None:
        self._taken = bytearray(length)
        self._claims: list[tuple[int, int, PiiKind, bool]] = []

    def claim(self, kind: PiiKind, candidate: _Candidate) -> None:
        start, end = candidate.start, candidate.end
        if self._taken.find(1, start, end) != -1:
            return
        self._taken[start:end] = b"\x01" * (end - start)
        self._claims.append((start, end, kind, candidate.valid))

    def findings(self) -> list[Finding]:
        return [Finding(kind, start, end) for start, end, kind, valid in sorted(self._claims) if valid]


# Kinds made of digits are searched within 40 characters of a digit: room for an IBAN's letters, an IPv6
# address's leading hex letters and the look-arounds of every digit pattern. Past a few dozen digits the
# windows would cover most of the text, and one scan of it is cheaper.
_WINDOW_MARGIN = 40
_MAX_DIGITS_FOR_WINDOWS = 32


def _digit_windows(text: str) -> list[Window]:
    digits = sum(map(text.count, "0123456789"))
    if digits > _MAX_DIGITS_FOR_WINDOWS:
        return [(0, len(text))]
    windows: list[Window] = []
    for position in sorted(_positions_of_digits(text)):
        start, end = max(0, position - _WINDOW_MARGIN), position + 1 + _WINDOW_MARGIN
        if windows and start <= windows[-1][1]:
            start = windows.pop()[0]
        windows.append((start, end))
    return windows


def _positions_of_digits(text: str) -> Iterator[int]:
    for digit in "0123456789":
        position = text.find(digit)
        while position != -1:
            yield position
            position = text.find(digit, position + 1)


def _scan(pattern: re.Pattern[str], text: str, windows: Sequence[Window]) -> Iterator[re.Match[str]]:
    for start, end in windows:
        yield from pattern.finditer(text, start, end)


# --------------------------------------------------------------------------------------------- secrets

_TOKENS = tuple(re.compile(pattern + r"(?![\w-])") for pattern in TOKEN_PATTERNS)
# HTTP Authorization credentials: `Bearer <token>`, `Basic <base64 of user:password>`.
_BEARER = re.compile(r"[Bb](?<![\w-][Bb])earer\s+([A-Za-z0-9._~+/-]{16,}=*)(?![\w~+/=-])")
_BASIC = re.compile(r"[Bb](?<![\w-][Bb])asic\s+([A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])")
_PRIVATE_KEY = re.compile(
    # Through the END line; a block cut short is redacted through its base64 body.
    r"-----BEGIN[A-Z0-9 ]* PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]* PRIVATE KEY-----|[A-Za-z0-9+/=\s:,-]*)",
    re.DOTALL,
)
_SECRET_KEYWORDS = ("key", "secret", "pass", "pwd", "token", "credential")
_ASSIGNMENT_PATTERN = r"""
    (?P<key>api[_-]?key|access[_-]?key|auth[_-]?key|secret|passphrase|password|passwd|pass|pwd|token|credentials?)
    ["']?[ \t]*[:=][ \t]*
    (?:"(?P<dq>[^"\n]{1,256})"|'(?P<sq>[^'\n]{1,256})'|(?P<bare>(?:[^\s"'&,;]|&(?!\w+=))+))"""
# Matched against the lower-cased text (much faster); the case-insensitive form is for the rare text
# whose lower-casing changes its length, which would shift the offsets.
_ASSIGNMENT = re.compile(_ASSIGNMENT_PATTERN, re.VERBOSE)
_ASSIGNMENT_ANY_CASE = re.compile(_ASSIGNMENT_PATTERN, re.VERBOSE | re.IGNORECASE)
# Values that stand for a secret rather than being one: templates, masks, defaults, code.
_NOT_A_SECRET = re.compile(
    r"""\[[A-Z]+\] | <.*> | \$\{?[\w.]*\}? | \{\{.* | %\(?\w*\)?s? | [*x.•]+
      | [A-Za-z_][\w.]*[(\[].* | [(\[{].*
      | (?:null|none|nil|true|false|undefined|empty|redacted|changeme|change_me|example|sample|dummy|test
      |placeholder|password|passwd|secret|token|your[_-]?\w*|todo|tbd|n/a)""",
    re.VERBOSE | re.IGNORECASE,
)


def _secrets(text: str, scope: _Scope) -> Iterator[_Candidate]:
    where = scope.everywhere
    for pattern in _TOKENS:
        yield from (_Candidate(m.start(), m.end()) for m in _scan(pattern, text, where) if _mixed(m[0]))
    if "earer" in text:
        yield from (_Candidate(m.start(1), m.end(1)) for m in _scan(_BEARER, text, where) if _mixed(m[1]))
    if "asic" in text:
        basics = _scan(_BASIC, text, where)
        yield from (_Candidate(m.start(1), m.end(1)) for m in basics if _user_colon_password(m[1]))
    if "-----BEGIN" in text:
        yield from (_Candidate(m.start(), m.end()) for m in _scan(_PRIVATE_KEY, text, where))
    yield from _assigned_secrets(text, where)


def _assigned_secrets(text: str, windows: Sequence[Window]) -> Iterator[_Candidate]:
    lowered = text.lower()
    if not any(keyword in lowered for keyword in _SECRET_KEYWORDS):
        return
    same_length = len(lowered) == len(text)
    matches = (
        _scan(_ASSIGNMENT, lowered, windows) if same_length else _scan(_ASSIGNMENT_ANY_CASE, text, windows)
    )
    for match in matches:
        group = next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)
        start, end = match.span(group)
        value = text[start:end]
        if group == "bare":
            value = _without_trailing_punctuation(value)
        if _is_secret_value(match.group("key"), value):
            yield _Candidate(start, start + len(value))


def _without_trailing_punctuation(value: str) -> str:
    """Drops what ends the sentence or closes a bracket opened before the value."""
    while value and (value[-1] in ".,;:" or (value[-1] in ")]}>" and _OPENERS[value[-1]] not in value)):
        value = value[:-1]
    return value


_OPENERS = {")": "(", "]": "[", "}": "{", ">": "<"}
_WORD_OR_IDENTIFIER = re.compile(r"[a-z_.]+|[A-Z_.]+")  # `changeme`, `self.password`, `KEY_PASSWORD`


def _is_secret_value(key: str, value: str) -> bool:
    if _NOT_A_SECRET.fullmatch(value):
        return False
    if "pass" in key or "pwd" in key:
        # A password key is cue enough, but a lowercase word or identifier after it is prose or code.
        return len(value) >= 6 and not _WORD_OR_IDENTIFIER.fullmatch(value)
    return _looks_random(value)


def _user_colon_password(value: str) -> bool:
    try:
        return b":" in base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error: not base64
        return False


def _looks_random(value: str) -> bool:
    """Machine-made: long, mixing letters and digits, and not repetitive."""
    return len(value) >= 12 and _mixed(value) and _entropy(value) >= 3.0


def _mixed(value: str) -> bool:
    """Has a letter and a digit: real tokens do; prose and placeholders mostly do not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(count / n * math.log2(count / n) for count in Counter(value).values())


# ----------------------------------------------------------------------------------------- card numbers

# 13-19 digits, optionally grouped by spaces or dashes; a longer digit run is some other number.
_CARD = re.compile(r"[0-9](?<![\w-][0-9])(?<![0-9][ .][0-9])(?:[ -]?[0-9]){12,18}+(?![\w-]|[ .][0-9])")
_CARD_GROUPS = ((4, 6, 5), (4, 6, 4))  # American Express, Diners Club; otherwise groups of four


def _lengths_by_prefix() -> dict[str, frozenset[int]]:
    """Card number lengths by the first four digits, for a single lookup per candidate."""
    table: dict[str, frozenset[int]] = {}
    for low, high, lengths in CARD_ISSUERS:
        for prefix in range(int(low.ljust(4, "0")), int(high.ljust(4, "9")) + 1):
            table[str(prefix)] = table.get(str(prefix), frozenset()) | frozenset(lengths)
    return table


_CARD_LENGTHS = _lengths_by_prefix()


def _cards(text: str, scope: _Scope) -> Iterator[_Candidate]:
    for match in _scan(_CARD, text, scope.digits):
        if _is_card_number(match.group()):
            yield _Candidate(match.start(), match.end())


def _is_card_number(candidate: str) -> bool:
    digits = candidate.replace(" ", "").replace("-", "")
    known_issuer = len(digits) in _CARD_LENGTHS.get(digits[:4], ())
    return known_issuer and _luhn(digits) and _well_grouped(candidate)


def _well_grouped(candidate: str) -> bool:
    if " " in candidate and "-" in candidate:
        return False
    lengths = tuple(len(group) for group in candidate.replace("-", " ").split(" "))
    fours = all(n == 4 for n in lengths[:-1]) and 1 <= lengths[-1] <= 4
    return len(lengths) == 1 or fours or lengths in _CARD_GROUPS


_LUHN_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)  # 2*d with its digits summed


def _luhn(digits: str) -> bool:
    kept = sum(map(int, digits[-1::-2]))
    doubled = sum(_LUHN_DOUBLED[int(d)] for d in digits[-2::-2])
    return (kept + doubled) % 10 == 0


# ------------------------------------------------------------------------------------------------ IBANs

# Found from its check digits (the country code is checked behind them), so the engine skips to digits.
_IBAN = re.compile(
    r"[0-9](?<=[A-Za-z]{2}[0-9])(?<![A-Za-z0-9]{3}[0-9])[0-9]"  # check digits after a country code
    r"(?: ?[A-Za-z0-9]{4}){2,8}+(?: ?[A-Za-z0-9]{1,3})?"  # the account, in groups of four or not
)


def _ibans(text: str, scope: _Scope) -> Iterator[_Candidate]:
    for match in _scan(_IBAN, text, scope.digits):
        start = match.start() - 2  # the country code
        candidate = text[start : match.end()]
        length = IBAN_LENGTHS.get(candidate[:2].upper())
        if length is None:
            continue
        end = _end_of_nth_alnum(candidate, length)
        if end is not None and _mod97(candidate[:end]):
            yield _Candidate(start, start + end)
        else:  # IBAN-shaped: its digit groups are not phone numbers or SSNs either
            yield _Candidate(start, match.end(), valid=False)


def _end_of_nth_alnum(candidate: str, n: int) -> int | None:
    """Index just past the n-th non-space character, if that ends a group (the rest is other text)."""
    seen = 0
    for i, char in enumerate(candidate):
        seen += char != " "
        if seen == n:
            return i + 1 if i + 1 == len(candidate) or candidate[i + 1] == " " else None
    return None


_IBAN_LETTER_VALUES = str.maketrans({chr(ord("A") + i): str(10 + i) for i in range(26)})  # A=10 ... Z=35


def _mod97(iban: str) -> bool:
    compact = iban.replace(" ", "").upper()
    return int((compact[4:] + compact[:4]).translate(_IBAN_LETTER_VALUES)) % 97 == 1


# ------------------------------------------------------------------------------------------------- SSNs

# Dashed (123-45-6789) stands on its own; spaced or bare nine digits are too common in other numbers to
# count without an SSN cue before them.
_SSN = re.compile(
    r"[0-9](?<![\w-][0-9])(?<![0-9][ .][0-9])[0-9]{2}([- ]?)[0-9]{2}\1[0-9]{4}(?![\w-]|[ .][0-9])"
)
_SSN_CUE_WORDS = ("ssn", "social security", "ss#", "ss #")
# A placeholder is no cue: `[SSN] 123456789` stays as it is.
_SSN_CUE = re.compile(r"(?:\b(?<!\[)ssn|social\s+security|\bss\s?#)[^\n\d]{0,16}$", re.IGNORECASE)
# An identifier this label names is not an SSN, whatever its shape.
_OTHER_ID_LABEL = re.compile(
    r"\b(?:build|part|model|order|invoice|ticket|lot|ref|serial|sku|case|version|item)\W{0,3}$", re.IGNORECASE
)


def _ssns(text: str, scope: _Scope) -> Iterator[_Candidate]:
    lowered = text.lower()
    cued_anywhere = any(cue in lowered for cue in _SSN_CUE_WORDS)
    for match in _scan(_SSN, text, scope.digits):
        if match.group(1) == "-":
            found = not _follows(_OTHER_ID_LABEL, text, match.start(), 20)
        else:
            found = cued_anywhere and _follows(_SSN_CUE, text, match.start(), 40)
        if found and _valid_ssn(match.group()):
            yield _Candidate(match.start(), match.end())


def _valid_ssn(candidate: str) -> bool:
    """Never issued: area 000, 666 or 9xx, group 00, serial 0000."""
    digits = candidate.replace("-", "").replace(" ", "")
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _follows(label: re.Pattern[str], text: str, start: int, reach: int) -> bool:
    """Whether label ends within `reach` characters before start."""
    return label.search(text, max(0, start - reach), start) is not None


# ----------------------------------------------------------------------------------------------- emails

# Found from the "@" (fast); the local part is then read backwards from it.
_EMAIL_DOMAIN = re.compile(r"@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}(?![\w-]|\.\w|:[\w/~])")
_REVERSED_LOCAL_PART = re.compile(r"[\w.%+'-]{1,65}")


def _emails(text: str, scope: _Scope) -> Iterator[_Candidate]:
    if "@" not in text:
        return
    for domain in _scan(_EMAIL_DOMAIN, text, scope.everywhere):
        start = _local_part_start(text, domain.start())
        if start is not None and domain.group().rsplit(".", 1)[1].lower() not in FILE_EXTENSIONS:
            yield _Candidate(start, domain.end())


def _local_part_start(text: str, at: int) -> int | None:
    """Start of the local part ending at `at`: at most 64 characters, not starting with . or '."""
    run = _REVERSED_LOCAL_PART.match(text[max(0, at - 65) : at][::-1])
    if run is None or run.end() > 64:
        return None
    start = at - run.end()
    while start < at and text[start] in ".'":
        start += 1
    return start if start < at else None


# ------------------------------------------------------------------------------------------ IP addresses

_IPV4 = re.compile(r"[0-9](?<![\w.][0-9])[0-9]{0,2}(?:\.[0-9]{1,3}){3}(?![\w]|\.[0-9])")
# A run of hex digits, colons and dots with a colon in its first five characters; `ipaddress` decides.
_IPV6 = re.compile(r"[0-9A-Fa-f:](?<![\w:.][0-9A-Fa-f:])(?=[0-9A-Fa-f]{0,3}:)[0-9A-Fa-f:.]{2,44}+")
# A dotted quad after these words (or a comparison, as in `foo>=1.2.1.0`) is a version or section number.
_VERSION_CUE = re.compile(
    r"(?:\bv|\bver(?:sion)?|\brelease|\bfirmware|\bbuild|\bsection|\bchapter|\bclause|§|[<>=~!]=|[<>])\.?\s*$",
    re.IGNORECASE,
)


def _ips(text: str, scope: _Scope) -> Iterator[_Candidate]:
    for match in _scan(_IPV4, text, scope.digits):
        if _host_ipv4(match.group()) and not _follows(_VERSION_CUE, text, match.start(), 12):
            yield _Candidate(match.start(), match.end())
    if "::" in text or text.count(":") >= 7:
        for match in _scan(_IPV6, text, scope.digits):
            candidate = match.group().rstrip(".")  # a full stop ending the sentence
            if _host_ipv6(candidate):
                yield _Candidate(match.start(), match.start() + len(candidate))


def _host_ipv4(candidate: str) -> bool:
    """Octets of at most 255 without leading zeros; loopback and 0.0.0.0 identify nobody."""
    octets = candidate.split(".")
    valid = all(int(o) <= 255 and (o == "0" or not o.startswith("0")) for o in octets)
    return valid and octets[0] != "127" and candidate != "0.0.0.0"


def _host_ipv6(candidate: str) -> bool:
    """Rules out `Abc::Def` (no digit), slices like `1::2` (no group of three or more hex digits),
    loopback and unspecified addresses, and anything `ipaddress` rejects."""
    has_digit = any(c.isdigit() for c in candidate)
    if candidate.count(":") < 2 or not has_digit or all(len(g) < 3 for g in re.split(r"[:.]", candidate)):
        return False
    try:
        address = ipaddress.IPv6Address(candidate)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


# ---------------------------------------------------------------------------------------- phone numbers

_PHONE_INTERNATIONAL = re.compile(r"\+(?<![\w+]\+)[1-9][0-9]{0,2}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]+))++")
# National formats, separated. North American: [1-](NXX) NXX-XXXX or NXX-NXX-XXXX, where N is 2-9. With a
# trunk zero: 020 7946 0958, (020) 7946 0958, 01 99 00 56 78. Next to a colon, digits belong to a time.
_PHONE_NATIONAL = re.compile(
    r"""[(0-9](?<![\w.:+-][(0-9])(?<![0-9][ ][(0-9])
    (?: (?P<nanp> (?: (?<=\()[2-9][0-9]{2}\)[ .-]?
                    | (?<=1)[ .-](?:\([2-9][0-9]{2}\)[ .-]?|[2-9][0-9]{2}[ .-])
                    | (?<=[2-9])[0-9]{2}[ .-] )
                  [2-9][0-9]{2}[ .-][0-9]{4} )
      | (?P<trunk> (?:(?<=\()0[0-9]{1,4}\)|(?<=0)[0-9]{1,4}) (?:[ .-][0-9]{2,6}){1,5}+ )
    )(?![\w]|[.:-]?[0-9])""",
    re.VERBOSE,
)


def _phones(text: str, scope: _Scope) -> Iterator[_Candidate]:
    for match in _scan(_PHONE_INTERNATIONAL, text, scope.everywhere) if scope.digits else ():  # "+": fast
        if _international_number(match.group()):
            yield _Candidate(match.start(), match.end())
    for match in _scan(_PHONE_NATIONAL, text, scope.digits):
        digits_fit = match.group("nanp") or 10 <= _digit_count(match.group()) <= 11
        if digits_fit and len(set(_SEPARATOR.findall(match.group()))) == 1:
            yield _Candidate(match.start(), match.end())


_SEPARATOR = re.compile(r"[0-9]([ .-])[0-9]")  # mixed separators make a clause or a timestamp: 252.227-7013


def _international_number(candidate: str) -> bool:
    """E.164 allows 15 digits; fewer than 8 is a count or a price, and an unseparated run needs 10 (short
    ones are signed numbers). One dot and no other separator is a decimal: +35236450.6."""
    digits = _digit_count(candidate)
    separators = sum(not c.isdigit() for c in candidate) - 1  # the "+"
    if candidate.count(".") == 1 and separators == 1:
        return False
    return 8 <= digits <= 15 and (separators > 0 or digits >= 10)


def _digit_count(candidate: str) -> int:
    return sum(c.isdigit() for c in candidate)


# Priority when spans overlap. Secrets first: a key block or token may hold anything. Then the kinds a
# checksum or an allocation rule confirms, whose spans are the most specific, and the shape-only kinds
# last: a phone-like run inside a longer number is a fragment of it.
_DETECTORS: tuple[tuple[PiiKind, Detector], ...] = (
    (PiiKind.SECRET, _secrets),
    (PiiKind.CARD, _cards),
    (PiiKind.IBAN, _ibans),
    (PiiKind.SSN, _ssns),
    (PiiKind.EMAIL, _emails),
    (PiiKind.IP, _ips),
    (PiiKind.PHONE, _phones),
)
