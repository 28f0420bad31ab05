"""The word lists the extractive memory extractor (episodic.summarize.memories) reads: the
first words of a hypothetical or a request, the capitalised words that are not names, the
words of each topic, and the names and counts of future dates. Data only; the rules that use
them are in memories.py."""

from __future__ import annotations

# A clause opening with one of these is a hypothetical or a request, not the user's memory.
HYPOTHETICAL_START = frozenset(
    {"if", "suppose", "supposing", "imagine", "assuming", "hypothetically", "say", "what", "unless"}
)
REQUEST_START = frozenset(
    {"please", "can", "could", "would", "will", "let's", "help", "tell", "show", "give", "remind", "find",
     "make", "write", "list", "explain", "check", "do", "does", "did", "is", "are", "how", "why",
     "where", "when"}
)  # fmt: skip
# Capitalised words that start no name.
NOT_NAMES = frozenset(
    [
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "OK",
        "AM",
        "PM",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
)
# A memory's topics: each topic's words, any of which names it.
TOPICS: dict[str, frozenset[str]] = {
    topic: frozenset(words.split())
    for topic, words in {
        "work": "job work works worked working boss office career promoted promotion colleague colleagues "
        "company salary engineer nurse manager shift shifts team business",
        "family": "mom mum mother dad father sister brother son daughter kids children grandma grandpa "
        "family parents aunt uncle cousin baby",
        "travel": "trip travel travelling traveling flight flying visit visiting vacation holiday honeymoon "
        "abroad moved hotel",
        "health": "diagnosed diabetes allergic allergy doctor hospital sick health gym marathon run running "
        "injury therapy intolerant",
        "food": "food eat eating meat vegetarian vegan cook cooking curry coffee tea recipe restaurant sugar "
        "gluten peanuts dinner",
        "hobbies": "guitar painting painted paint music band album pottery reading books hiking games "
        "photography dance dancing football blues",
        "pets": "dog dogs cat cats pet pets puppy kitten",
        "education": "school university college phd student studied study studying graduated degree class "
        "kindergarten course",
        "money": "money saving savings salary deposit rent mortgage budget loan bank pension",
        "home": "home house apartment flat live lives living moved neighbourhood countryside",
        "relationships": "husband wife partner boyfriend girlfriend married anniversary wedding date dating "
        "friend friends",
    }.items()
}
# What "next spring", "in March" or "in two weeks" name.
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
WEEKDAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
