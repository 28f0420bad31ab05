"""The tables PII detection (episodic.domain.pii) reads: the token formats of known secret
issuers, card issuers' prefixes and lengths, IBAN lengths by country, and the file extensions
that make an address a file name. Data only; the rules that use them are in pii.py."""

from __future__ import annotations

# Secret tokens by issuer, each with its boundary look-behind after the first character (so the
# regex engine skips ahead); pii.py adds the trailing boundary.
TOKEN_PATTERNS = (
    r"A(?<![\w-]A)(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA)[A-Z0-9]{16}",  # AWS access key id
    r"g(?<![\w-]g)(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{60,255})",  # GitHub
    r"xox(?<![\w-]xox)[abprs]-[A-Za-z0-9-]{20,}",  # Slack
    r"sk_(?<![\w-]sk_)(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe secret key
    r"rk_(?<![\w-]rk_)(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe restricted key
    r"sk-(?<![\w-]sk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",  # OpenAI-style
    r"AIza(?<![\w-]AIza)[A-Za-z0-9_-]{35}",  # Google API key
    r"eyJ(?<![\w-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # JWT
)
# (lowest prefix, highest prefix, lengths)
CARD_ISSUERS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("4", "4", (13, 16, 19)),  # Visa
    ("51", "55", (16,)),  # Mastercard
    ("2221", "2720", (16,)),  # Mastercard 2-series
    ("34", "34", (15,)),  # American Express
    ("37", "37", (15,)),
    ("6011", "6011", (16, 17, 18, 19)),  # Discover
    ("644", "649", (16, 17, 18, 19)),
    ("65", "65", (16, 17, 18, 19)),
    ("3528", "3589", (16, 17, 18, 19)),  # JCB
    ("300", "305", (14, 15, 16, 17, 18, 19)),  # Diners Club
    ("36", "36", (14, 15, 16, 17, 18, 19)),
    ("38", "39", (14, 15, 16, 17, 18, 19)),
    ("62", "62", (16, 17, 18, 19)),  # UnionPay
    ("2200", "2204", (16, 17, 18, 19)),  # Mir
    ("5019", "5019", (16,)),  # Dankort
    *(
        (maestro, maestro, tuple(range(12, 20)))
        for maestro in ("5018", "5020", "5038", "5893", "6304", "6759")
    ),
    ("6761", "6763", tuple(range(12, 20))),  # Maestro
)
# ISO 13616 registry: country -> IBAN length.
IBAN_LENGTHS = {
    **dict.fromkeys(["NO"], 15),
    **dict.fromkeys(["BE"], 16),
    **dict.fromkeys(["DK", "FI", "FK", "FO", "GL", "NL", "SD"], 18),
    **dict.fromkeys(["MK", "SI"], 19),
    **dict.fromkeys(["AT", "BA", "EE", "KZ", "LT", "LU", "MN", "XK"], 20),
    **dict.fromkeys(["CH", "HR", "LI", "LV"], 21),
    **dict.fromkeys(["BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"], 22),
    **dict.fromkeys(["AE", "GI", "IL", "IQ", "OM", "SO", "TL"], 23),
    **dict.fromkeys(["AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"], 24),
    **dict.fromkeys(["LY", "PT", "ST"], 25),
    **dict.fromkeys(["IS", "TR"], 26),
    **dict.fromkeys(["BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM"], 27),
    **dict.fromkeys(["AL", "AZ", "BY", "CY", "DO", "GT", "HU", "LB", "NI", "PL", "SV"], 28),
    **dict.fromkeys(["BR", "EG", "PS", "QA", "UA"], 29),
    **dict.fromkeys(["JO", "KW", "MU", "YE"], 30),
    **dict.fromkeys(["MT", "SC"], 31),
    **dict.fromkeys(["LC"], 32),
    **dict.fromkeys(["RU"], 33),
}
# A "TLD" that is a file extension makes `icon@2x.png` or `backup@2024.tar.gz` a file name.
FILE_EXTENSIONS = frozenset(
    {"png", "jpg", "jpeg", "gif", "webp", "svg", "bmp", "ico", "tif", "tiff", "heic", "pdf", "txt", "csv",
     "json", "yaml", "yml", "toml", "xml", "html", "htm", "css", "js", "ts", "jsx", "tsx", "map",
     "gz", "tgz", "bz2", "xz", "zst", "tar"}
)  # fmt: skip
