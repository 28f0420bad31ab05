"""Seconds per search of an agent whose knowledge vectors are larger than the knowledge index's
whole cache share, searched in turn with a small agent that fits (issue 43, finding 6).

Before: the index cache of commit 46c0347 (state/index_cache.py as it was), which held the
large agent (evicting the small one) and dropped it at the small one's next load, so every
search of either read its scope from SQL again. After: the cache of the working tree, which
reads the large agent once, finds it too large, and from then on searches it a page at a time
from SQL, the small one staying held. Both over the same SQLite file (real SQL reads, the
real FAISS index), in process; the seconds are wall time on this machine.

    .venv/bin/python scripts/time_oversize_scope.py [--chunks 50000] [--searches 5]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from sqlalchemy import create_engine

from episodic.domain.knowledge import knowledge_scope
from episodic.index.faiss_index import FaissVectorIndex
from episodic.store import schema as s
from episodic.store.database import open_database
from episodic.store.vector_sources import SqlKnowledgeVectors

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "46c0347"
DIM, MODEL, TENANT = 384, "minilm", "t"
VECTOR_BYTES = DIM * 4 + 100


def old_cache_module() -> ModuleType:
    code = subprocess.run(
        ["git", "show", f"{BEFORE}:server/episodic/state/index_cache.py"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("index_cache_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(code, "index_cache_before.py", "exec"), module.__dict__)
    return module


def fill(url: str, sizes: dict[str, int]) -> None:
    engine = create_engine(url)
    s.metadata.create_all(engine)
    now = datetime.now(UTC)
    rng = np.random.default_rng(7)
    with engine.begin() as conn:
        for agent, n in sizes.items():
            docs = (n + 9) // 10
            conn.execute(
                s.knowledge_documents.insert(),
                [
                    {"tenant_id": TENANT, "agent_id": agent, "document_id": f"doc-{d:06d}", "title": "",
                     "uri": "", "format": "text", "text": "", "metadata": {}, "content_hash": "",
                     "chunk_count": 10, "created_at": now, "updated_at": now, "expires_at": None}
                    for d in range(docs)
                ],
            )  # fmt: skip
            vectors = rng.standard_normal((n, DIM)).astype("<f4")
            conn.execute(
                s.knowledge_chunks.insert(),
                [
                    {"tenant_id": TENANT, "agent_id": agent, "document_id": f"doc-{i // 10:06d}",
                     "chunk_index": i % 10, "text": "", "start_char": 0, "end_char": 0, "heading_path": [],
                     "model": MODEL, "vector": vectors[i].tobytes()}
                    for i in range(n)
                ],
            )  # fmt: skip
    engine.dispose()


async def run(module: Any, url: str, budget: int, searches: int) -> dict[str, Any]:
    database = open_database(url)
    source = SqlKnowledgeVectors(database, MODEL)
    cache = module.ResidentScopes(
        FaissVectorIndex(DIM), source, dimension=DIM, max_bytes=budget, lock=asyncio.Lock()
    )
    big, small = knowledge_scope(TENANT, "big"), knowledge_scope(TENANT, "small")
    query = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
    took: dict[str, list[float]] = {"big": [], "small": []}
    try:
        for _ in range(searches):
            for name, scope in (("big", big), ("small", small)):
                started = time.perf_counter()
                hits = await cache.nearest(scope, query, 50)
                took[name].append(time.perf_counter() - started)
                assert len(hits) == 50
    finally:
        await database.dispose()
    return {"took": took, "loads": cache.loads, "evictions": cache.evictions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=50_000, help="the large agent's chunks")
    parser.add_argument("--small", type=int, default=2_000, help="the small agent's chunks")
    parser.add_argument("--searches", type=int, default=5, help="searches of each agent")
    args = parser.parse_args()
    budget = args.chunks // 2 * VECTOR_BYTES  # half the large agent: the small one fits
    from episodic.state import index_cache as after

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/oversize.db"
        fill(url, {"big": args.chunks, "small": args.small})
        mib = args.chunks * VECTOR_BYTES / 2**20
        print(
            f"large agent {args.chunks} chunks ({mib:.0f} MiB of vectors), small agent {args.small}, "
            f"knowledge budget {budget / 2**20:.0f} MiB; searched in turn x{args.searches}"
        )
        for label, module in (("before", old_cache_module()), ("after", after)):
            result = asyncio.run(run(module, url, budget, args.searches))
            big, small = result["took"]["big"], result["took"]["small"]
            later = ", ".join(f"{t:.3f}" for t in big[1:])
            print(
                f"{label:>6}: large agent {big[0]:.3f} s first, {statistics.median(big[1:]):.3f} s median "
                f"later ({later}); small agent {statistics.median(small[1:]):.4f} s median later; "
                f"loads {result['loads']}, evictions {result['evictions']}"
            )


if __name__ == "__main__":
    main()
