#!/usr/bin/env bash
# Installs @episodic/client the way another project does: `npm pack` (prepack builds dist/),
# `npm install <tarball>` into a fresh project in a temporary directory, then a plain ESM
# script there imports "@episodic/client", tsc type-checks a TypeScript file against the
# installed typings, and both call a live `episodic serve` (throwaway SQLite, hashing
# embedder, one API key). Exits 0 when all of that works.
# Usage: clients/node/scripts/pack-install-test.sh   (after npm ci; EPISODIC_BIN overrides the server)
set -euo pipefail
node_dir="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$node_dir/../.." && pwd)"
episodic="${EPISODIC_BIN:-$repo/.venv/bin/episodic}"
tsc="$node_dir/node_modules/.bin/tsc"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/episodic-pack-XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "--- npm pack"
(cd "$node_dir" && npm pack --silent --pack-destination "$tmp" >/dev/null)
tarball="$(ls "$tmp"/episodic-client-*.tgz)"
listing="$(tar -tzf "$tarball")"
for file in package/package.json package/dist/src/index.js package/dist/src/index.d.ts package/dist/src/gen/episodic/v1/episode_service.js; do
  grep -qx "$file" <<<"$listing" || { echo "$file is missing from $(basename "$tarball")" >&2; exit 1; }
done
if grep -q '^package/dist/test/' <<<"$listing"; then echo "the tarball ships dist/test" >&2; exit 1; fi
echo "$(basename "$tarball"): $(wc -l <<<"$listing") files"

echo "--- npm install into a new project"
app="$tmp/app"
mkdir "$app"
cat >"$app/package.json" <<'EOF'
{ "name": "episodic-pack-install-test", "version": "1.0.0", "private": true, "type": "module" }
EOF
(cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error "$tarball")

cat >"$app/main.mjs" <<'EOF'
import assert from "node:assert/strict";
import { EpisodicClient, NotFoundError } from "@episodic/client";
import { DiagnosticsServiceClient } from "@episodic/client/gen/episodic/v1/diagnostics_service.js";

const [address, apiKey] = process.argv.slice(2);
const client = new EpisodicClient(address, { apiKey });
try {
  const { payload } = await client.echo("hello from npm pack");
  assert.equal(payload.toString("utf8"), "hello from npm pack");
  const missing = await client.getEpisode("ep_missing").catch((error) => error);
  assert.ok(missing instanceof NotFoundError, String(missing));
  assert.equal(typeof DiagnosticsServiceClient, "function");
  console.log("echo ok through the installed @episodic/client");
} finally {
  client.close();
}
EOF

cat >"$app/check.ts" <<'EOF'
import { EpisodicClient, type ListEpisodesOptions } from "@episodic/client";
import type { EchoResponse } from "@episodic/client/gen/episodic/v1/diagnostics_service.js";

const client: EpisodicClient = new EpisodicClient("127.0.0.1:1");
const options: ListEpisodesOptions = { state: "open", pageSize: 10 };
const reply: Promise<EchoResponse> = client.echo("typed", { deadlineMs: 1 });
void Promise.allSettled([reply, client.listEpisodes(options)]).then(() => client.close());
EOF
cat >"$app/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true,
    "noEmit": true, "skipLibCheck": true, "types": ["node"], "typeRoots": ["$node_dir/node_modules/@types"]
  },
  "files": ["check.ts"]
}
EOF
echo "--- tsc against the installed typings"
(cd "$app" && "$tsc" -p .)

echo "--- episodic serve"
api_key="epk_pack_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
key_hash="$(printf '%s' "$api_key" | sha256sum | cut -d' ' -f1)"
# The server reads only what is given here, not a developer's EPISODIC_* settings.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^EPISODIC_' || true)
EPISODIC_DATABASE_URL="sqlite:///$tmp/x.db" "$episodic" serve --address=127.0.0.1:0 --embedder=hashing \
  --api-keys="tenant-pack=sha256:$key_hash" --shutdown-grace-seconds=1 --no-access-log 2>"$tmp/server.log" &
server_pid=$!
port=""
for _ in $(seq 600); do
  port="$(grep '"message": *"serving"' "$tmp/server.log" | grep -o '"port": *[0-9]*' | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "episodic serve did not start; its log:" >&2
  tail -20 "$tmp/server.log" >&2
  exit 1
fi

echo "--- node main.mjs against 127.0.0.1:$port"
(cd "$app" && node main.mjs "127.0.0.1:$port" "$api_key")
echo "pack-install test passed"
