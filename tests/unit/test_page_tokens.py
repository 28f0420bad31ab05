"""Page tokens are opaque, and bound to the query that issued them."""

from __future__ import annotations

import pytest

from episodic.domain.paging import decode_token, encode_token
from episodic.errors import InvalidArgument


def test_a_token_round_trips_its_position() -> None:
    token = encode_token({"before_seq": 42}, {"episode_id": "ep"})
    assert decode_token(token, {"episode_id": "ep"}) == {"before_seq": 42}


def test_an_empty_token_means_the_first_page() -> None:
    assert decode_token("", {"episode_id": "ep"}) is None


@pytest.mark.parametrize("token", ["garbage!", "e30", "bnVsbA", "W10"])
def test_tokens_we_did_not_issue_are_invalid(token: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        decode_token(token, {"episode_id": "ep"})
    assert err.value.violations[0].field == "page_token"


def test_a_token_cannot_be_replayed_against_another_query() -> None:
    token = encode_token({"before_seq": 42}, {"episode_id": "ep"})
    with pytest.raises(InvalidArgument, match="different query"):
        decode_token(token, {"episode_id": "other"})
