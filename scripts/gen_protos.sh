#!/usr/bin/env bash
# Regenerates every committed stub from proto/: the server's episodic.v1 package and the
# client's private copy (same descriptors, imports rewritten to episodic_client.v1).
# Usage: scripts/gen_protos.sh   (with the dev extra installed; CI checks for drift)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(dirname "$(command -v python)")"
server_out=server
client_out=clients/python/src/episodic_client

rm -f "$server_out"/episodic/v1/*_pb2*.py* "$client_out"/v1/*_pb2*.py*
python -m grpc_tools.protoc -I proto \
  --plugin=protoc-gen-mypy="$bin/protoc-gen-mypy" \
  --plugin=protoc-gen-mypy_grpc="$bin/protoc-gen-mypy_grpc" \
  --python_out="$server_out" --mypy_out="$server_out" \
  --grpc_python_out="$server_out" --mypy_grpc_out="$server_out" \
  proto/episodic/v1/*.proto

mkdir -p "$client_out/v1"
for f in "$server_out"/episodic/v1/*_pb2*.py*; do
  sed -e 's/^from episodic\.v1 import/from episodic_client.v1 import/' \
      -e 's/^import episodic\.v1\.\([a-z_0-9]*\)$/import episodic_client.v1.\1/' \
      -e 's/\bepisodic\.v1\.\([a-z_0-9]*_pb2\)\b/episodic_client.v1.\1/g' \
      "$f" > "$client_out/v1/$(basename "$f")"
done
