#!/usr/bin/env bash
# Regenerates the committed TypeScript stubs in src/gen from proto/ (episodic.v1 and the
# vendored google.rpc status types): ts-proto from node_modules, run through the protoc of
# the repository's virtualenv (grpcio-tools), so nothing is downloaded.
# Usage: clients/node/scripts/generate.sh   (after `npm ci` in clients/node; CI checks for drift)
set -euo pipefail
node_dir="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$node_dir/../.." && pwd)"
python="${EPISODIC_PYTHON:-$repo/.venv/bin/python}"
plugin="$node_dir/node_modules/.bin/protoc-gen-ts_proto"
out="$node_dir/src/gen"

if [ ! -x "$plugin" ]; then
  echo "missing $plugin: run npm ci in clients/node first" >&2
  exit 1
fi

# esModuleInterop + importSuffix=.js: ESM that resolves under "module": "nodenext".
# useExactTypes=false: fromPartial accepts plain object literals the wrapper builds.
options="outputServices=grpc-js,env=node,esModuleInterop=true,importSuffix=.js,useExactTypes=false"

rm -rf "$out"
mkdir -p "$out"
cd "$repo/proto"
"$python" -m grpc_tools.protoc -I . \
  --plugin=protoc-gen-ts_proto="$plugin" \
  --ts_proto_out="$out" --ts_proto_opt="$options" \
  episodic/v1/*.proto google/rpc/*.proto
