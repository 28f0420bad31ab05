# Episodic: the gRPC memory service. The generated stubs and the tokenizer files are
# committed; the one build step is the word search's C loop (server/episodic/index/_postings.c),
# compiled in a stage of its own so that the image carries no compiler.
FROM python:3.11-slim AS wheel
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

RUN useradd --create-home --uid 10001 episodic \
 && mkdir /data && chown episodic /data

WORKDIR /app
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels

USER episodic
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
