"""Every RPC of the contract is a method of both Python clients (snake_case of its name):
a new RPC without a client method fails here, naming it."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from google.protobuf.descriptor import FileDescriptor

import episodic_client.v1
from episodic_client import AsyncEpisodicClient, EpisodicClient

# Every generated module of the contract that declares a service (a new file is walked too).
FILES: list[FileDescriptor] = [
    d
    for info in pkgutil.iter_modules(episodic_client.v1.__path__)
    if info.name.endswith("_pb2")
    for d in [importlib.import_module(f"episodic_client.v1.{info.name}").DESCRIPTOR]
    if d.services_by_name
]


def rpcs() -> list[str]:
    return [f"{s.name}.{m.name}" for f in FILES for s in f.services_by_name.values() for m in s.methods]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_the_walk_finds_every_service_file_of_the_contract() -> None:
    names = {f.name.rsplit("/", 1)[1] for f in FILES}
    assert len(rpcs()) > 30 and "episode_service.proto" in names


@pytest.mark.parametrize("client", [AsyncEpisodicClient, EpisodicClient], ids=["async", "sync"])
def test_every_rpc_has_a_client_method(client: type) -> None:
    missing = [rpc for rpc in rpcs() if not callable(getattr(client, snake(rpc.split(".")[1]), None))]
    assert missing == []
