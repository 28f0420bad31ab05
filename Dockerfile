# Episodic: the gRPC memory service. The generated stubs and the tokenizer files are
# committed; the one build step is the word search's C loop (server/episodic/index/_postings.c),
# compiled in a stage of its own so that the image carries no compiler.
#   docker build -t episodic:local .            (docs/deployment.md; tests/unit/test_dockerfile.py lints it)
# Both stages start from the same pinned base: the compiled loop must match the runtime's Python.
FROM python:3.11-slim-trixie AS wheel
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-trixie

# /data: the SQLite database and its erasure ledger (deploy/compose.single.yaml);
# /ledger: the erasure ledger every replica shares on PostgreSQL (deploy/compose.yaml,
# deploy/kubernetes/episodic.yaml). Owned by the server's user, so a new volume mounted there is too.
RUN groupadd --gid 10001 episodic \
 && useradd --create-home --uid 10001 --gid 10001 episodic \
 && mkdir /data /ledger && chown 10001:10001 /data /ledger

WORKDIR /app
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels

USER 10001:10001
# The int8 embedding model is derived once, here, into the user's cache: pods start warm.
RUN python -c "from episodic.embed import MiniLmEmbedder; MiniLmEmbedder()"
ENV EPISODIC_ADDRESS=0.0.0.0:50051 \
    EPISODIC_DATABASE_URL=sqlite:////data/episodic.db
VOLUME ["/data"]
EXPOSE 50051
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s \
  CMD ["episodic", "healthcheck"]

# Keys come from EPISODIC_API_KEYS or EPISODIC_API_KEYS_FILE; the server refuses to start
# without them (there is no dev mode in the image unless EPISODIC_INSECURE_DEV is set).
CMD ["episodic", "serve"]
