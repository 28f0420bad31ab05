"""The context bench's user messages differ from call to call, as a conversation's do: the
server keeps the embeddings of its last 1,024 query texts, so a bench that repeated one text
would time that cache instead of a new turn's MiniLM embedding. Echo carries the same texts,
so they must stay of a chat turn's size."""

from __future__ import annotations

from episodic.state.query_vectors import ENTRIES
from episodic_lab.bench_context.messages import REPEATED_MESSAGE, UserMessages, pool, user_message


def test_no_text_comes_back_while_the_query_cache_could_still_hold_it() -> None:
    window = [user_message(number) for number in range(2 * ENTRIES)]

    assert len(pool()) > ENTRIES
    assert len(set(window)) == len(window)


def test_the_pool_repeats_only_after_every_text_was_used() -> None:
    size = len(pool())

    assert len(set(pool())) == size
    assert user_message(size) == user_message(0)
    assert user_message(size + 7) == user_message(7)


def test_texts_are_short_questions_of_comparable_size() -> None:
    lengths = [len(text) for text in pool()]

    assert min(lengths) >= 60 and max(lengths) <= 140
    assert all(text[0].isupper() and text.endswith(("?", ".")) for text in pool())
    assert not any("{" in text for text in pool())


def test_consecutive_calls_get_consecutive_texts() -> None:
    messages = UserMessages()

    assert [messages.next() for _ in range(3)] == [user_message(0), user_message(1), user_message(2)]


def test_the_repeat_option_sends_one_text_every_time() -> None:
    messages = UserMessages(repeat=True)

    assert {messages.next() for _ in range(5)} == {REPEATED_MESSAGE}
