"""A server with the inspector on, for tests and scripts: gRPC to seed through, and plain
HTTP requests to the inspector (blocking http.client in a thread: the server shares the
event loop)."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config.concerns import InspectorSettings
from episodic.edges.inspector.serving import serving_inspector
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, settings_for


@dataclass(frozen=True)
class Answer:
    status_code: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def request(port: int, method: str, target: str, headers: dict[str, str]) -> Answer:
    """One HTTP request, blocking (run in a thread: the server shares the event loop)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, target, headers=headers)
        response = connection.getresponse()
        found = {k.lower(): v for k, v in response.getheaders()}
        return Answer(response.status, found, response.read().decode())
    finally:
        connection.close()


@dataclass
class Inspector:
    grpc: Client
    port: int

    async def get(
        self,
        path: str,
        key: str | None = KEY_A,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Answer:
        headers = {**(headers or {}), **({"Authorization": f"Bearer {key}"} if key else {})}
        target = f"{path}?{urllib.parse.urlencode(query)}" if query else path
        return await asyncio.to_thread(request, self.port, method, target, headers)

    async def json(self, path: str, key: str = KEY_A, **params: str) -> Any:
        answer = await self.get(path, key, query=params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    async def every_agent(self, key: str = KEY_A) -> list[str]:
        """The tenant's agent ids, every page (other tests' agents share the database)."""
        found: list[str] = []
        token = ""
        for _ in range(1000):
            page = await self.json("/api/agents", key, **({"page_token": token} if token else {}))
            found += [a["agent_id"] for a in page["agents"]]
            token = page["next_page_token"]
            if not token:
                return found
        raise AssertionError("the agent listing never ended")


@asynccontextmanager
async def inspector(database_url: str) -> AsyncIterator[Inspector]:
    """gRPC to seed with, and the inspector of the same app on a port of its own."""
    settings = settings_for(database_url)
    with_inspector = dataclasses.replace(settings, inspector_address="127.0.0.1:0")
    async with (
        open_app(settings) as app,
        serve_app(app, grace_seconds=1) as grpc_server,
        serving_inspector(InspectorSettings.of(with_inspector), app.services.inspection, app.keys) as port,
        grpc.aio.insecure_channel(f"127.0.0.1:{grpc_server.port}") as channel,
    ):
        assert port is not None
        yield Inspector(Client.of(channel, KEY_A), port)
