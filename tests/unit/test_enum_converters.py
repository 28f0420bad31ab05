"""Every enum of the contract has one converter table, and every value but *_UNSPECIFIED is
in it: a value added to a .proto without its mapping fails here, not at a user's call."""

from __future__ import annotations

import enum
import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor

import episodic.v1
from episodic.domain.model import PiiPolicy
from episodic.edges.grpc import context_convert, convert, diagnostics, knowledge_convert, memory_convert

# proto enum full name -> its table, keyed by proto number (tables kept domain -> proto are inverted)
TABLES: dict[str, Mapping[Any, enum.Enum]] = {
    "episodic.v1.Role": convert.ROLES,
    "episodic.v1.Episode.State": convert.STATES,
    "episodic.v1.CloseReason": convert.CLOSE_REASONS,
    "episodic.v1.DigestState": convert.DIGEST_STATES,
    "episodic.v1.SearchMode": convert.SEARCH_MODES,
    "episodic.v1.MatchSignal": convert.SIGNALS,
    "episodic.v1.RecallMode": convert.RECALL_MODES,
    "episodic.v1.PiiPolicy": convert.PII_POLICIES,
    "episodic.v1.ContextSection": {number: section for section, number in context_convert.SECTIONS.items()},
    "episodic.v1.Compaction": {number: kind for kind, number in context_convert.COMPACTIONS.items()},
    "episodic.v1.PassageFate": {number: fate for fate, number in context_convert.PASSAGE_FATES.items()},
    "episodic.v1.MemoryKind": memory_convert.KINDS,
    "episodic.v1.MemoryState": memory_convert.MEMORY_STATES,
    "episodic.v1.MemoryOrigin": memory_convert.ORIGINS,
    "episodic.v1.MemoryPlacement": memory_convert.PLACEMENTS,
    "episodic.v1.MemoryOutcome": memory_convert.OUTCOMES,
    "episodic.v1.DocumentFormat": knowledge_convert.FORMATS,
    "episodic.v1.KnowledgeOrigin": {number: origin for origin, number in knowledge_convert.ORIGINS.items()},
    "episodic.v1.KnowledgeFate": {number: fate for fate, number in knowledge_convert.FATES.items()},
    "episodic.v1.CheckIndexStatus": {number: state for state, number in diagnostics.STATES.items()},
}
# Domain values a request expresses by leaving the field unset.
SPOKEN_AS_UNSPECIFIED = {PiiPolicy.INHERIT}


def _enums_of(message: Descriptor) -> Iterator[EnumDescriptor]:
    yield from message.enum_types
    for nested in message.nested_types:
        yield from _enums_of(nested)


def contract_enums() -> dict[str, EnumDescriptor]:
    found: dict[str, EnumDescriptor] = {}
    for module in pkgutil.iter_modules(episodic.v1.__path__):
        if not module.name.endswith("_pb2"):
            continue
        descriptor = importlib.import_module(f"episodic.v1.{module.name}").DESCRIPTOR
        for top in descriptor.enum_types_by_name.values():
            found[top.full_name] = top
        for message in descriptor.message_types_by_name.values():
            found.update({e.full_name: e for e in _enums_of(message)})
    return found


def test_every_enum_of_the_contract_has_a_converter_table() -> None:
    assert set(contract_enums()) == set(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_value_but_unspecified_has_a_mapping(name: str) -> None:
    values = {v.number for v in contract_enums()[name].values if not v.name.endswith("_UNSPECIFIED")}
    assert set(TABLES[name]) == values


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_domain_value_has_a_proto_value(name: str) -> None:
    table = TABLES[name]
    domain = type(next(iter(table.values())))
    assert set(table.values()) | SPOKEN_AS_UNSPECIFIED >= set(domain)
    assert len(set(table.values())) == len(table), "two proto values map to one domain value"
