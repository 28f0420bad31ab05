"""Every domain error maps to one status code; rich details name fields."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2

from episodic import errors
from episodic.edges.grpc.status import STATUS_BY_ERROR, rich_status, status_code_for


def test_every_error_class_has_a_status_code() -> None:
    leaves = errors.EpisodicError.__subclasses__()
    assert set(leaves) == set(STATUS_BY_ERROR)


def test_a_subclass_inherits_its_parents_code() -> None:
    class EpisodeGone(errors.NotFound):
        pass

    assert status_code_for(EpisodeGone("episode", "x")) is grpc.StatusCode.NOT_FOUND


def test_invalid_argument_carries_bad_request_field_violations() -> None:
    code, status = rich_status(errors.InvalidArgument.of("message.content", "is required"))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    bad = error_details_pb2.BadRequest()
    assert status.details[1].Unpack(bad)
    assert [(v.field, v.description) for v in bad.field_violations] == [("message.content", "is required")]


def test_not_found_names_the_resource() -> None:
    _, status = rich_status(errors.NotFound("episode", "ep-9"))
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info) and info.reason == "EPISODE_NOT_FOUND"
