"""`episodic erase` on the wire: our own server's EraseUser called, its receipt handed back as
plain values (the command, cli/erase.py, prints them; only the gRPC edge and the clients
import the generated stubs)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.json_format import MessageToJson

from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub

Auth = tuple[tuple[str, str], ...]
TIMEOUT_SECONDS = 600.0  # an erasure scrubs freed space too (SQLite's WAL, PostgreSQL's VACUUM)

# The receipt's counts, in the order they are printed, each with the name it is printed as.
COUNTS = (
    ("episodes", "episodes"),
    ("messages", "messages"),
    ("tool_calls", "tool calls"),
    ("summaries", "summaries"),
    ("digests", "digests"),
    ("memories", "memories"),
    ("session_data", "session data"),
    ("model_calls", "model calls"),
    ("digest_vectors", "stored vectors"),
    ("text_rows", "full-text rows"),
    ("index_vectors", "in-memory vectors"),
)


@dataclass(frozen=True, slots=True)
class Erased:
    """An erasure's receipt: its id and time, the user's hash (what the audit log keeps),
    what was removed (name as printed, count) and whether freed space was scrubbed; `json`
    is the receipt as the API returns it."""

    erasure_id: str
    erase_time: str
    user_hash: str
    removed: tuple[tuple[str, int], ...]
    storage_scrubbed: bool
    json: str


def erase_user(channel: grpc.Channel, auth: Auth, user_id: str, agent_id: str) -> Erased:
    """EraseUser called once (an erasure is idempotent: again, it removes nothing more)."""
    request = pb.EraseUserRequest(user_id=user_id, agent_id=agent_id)
    response = EpisodeServiceStub(channel).EraseUser(request, metadata=auth, timeout=TIMEOUT_SECONDS)
    receipt = response.receipt
    return Erased(
        erasure_id=receipt.erasure_id,
        erase_time=receipt.erase_time.ToJsonString() if receipt.HasField("erase_time") else "",
        user_hash=receipt.user_hash,
        removed=tuple((shown, int(getattr(receipt, field))) for field, shown in COUNTS),
        storage_scrubbed=receipt.storage_scrubbed,
        json=MessageToJson(
            receipt,
            indent=2,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
            unquote_int64_if_possible=True,
        ),
    )
