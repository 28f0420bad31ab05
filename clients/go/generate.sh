#!/usr/bin/env bash
# Generates the Go stubs of episodic.v1 into clients/go/gen/episodic/v1 (git-ignored).
# Needs protoc-gen-go and protoc-gen-go-grpc on PATH (Debian: apt-get install protoc-gen-go
# protoc-gen-go-grpc; elsewhere: go install google.golang.org/protobuf/cmd/protoc-gen-go@latest
# google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest) and a protoc: $PROTOC, else `protoc`
# on PATH, else grpcio-tools' bundled one in the repository's .venv.
# google/rpc is not generated: Go code uses google.golang.org/genproto/googleapis/rpc/errdetails,
# the go_package the vendored proto/google/rpc files name.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -n "${PROTOC:-}" ]]; then
  read -r -a protoc <<<"$PROTOC"
elif command -v protoc >/dev/null; then
  protoc=(protoc)
else
  protoc=("$repo/.venv/bin/python" -m grpc_tools.protoc)
fi

rm -rf "$here/gen"
mkdir -p "$here/gen"
# module=... strips this module's path from go_package, so files land in gen/episodic/v1.
"${protoc[@]}" -I "$repo/proto" \
  --go_out="$here" --go_opt=module=episodic/clients/go \
  --go-grpc_out="$here" --go-grpc_opt=module=episodic/clients/go \
  "$repo"/proto/episodic/v1/*.proto
echo "generated $(ls "$here"/gen/episodic/v1/*.go | wc -l) files in clients/go/gen/episodic/v1"
