#!/usr/bin/env bash
# Re-verifies the Go client flow end to end: generates the Go stubs (clients/go/generate.sh),
# builds clients/go/quickstart, starts `episodic serve --insecure-dev` on a throwaway SQLite
# file, runs the quickstart twice (the second run finds the agent already there and two past
# episodes), checks its output and stops the server. Not run by CI.
#
# Offline, with Debian's Go toolchain and Go packages (bookworm: Go 1.19, grpc-go 1.33):
#   apt-get install golang-go protoc-gen-go protoc-gen-go-grpc \
#     golang-google-grpc-dev golang-google-genproto-dev golang-github-golang-protobuf-1-5-dev
# The build runs in GOPATH mode over /usr/share/gocode, so it needs no module proxy. With a
# module proxy, `cd clients/go && go mod tidy && go run ./quickstart ADDRESS` does the same.
#
# Usage: scripts/verify_go_client.sh [PORT]   (default 50091; needs the repository's .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
port="${1:-50091}"
address="127.0.0.1:$port"

for tool in go protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null || { echo "missing $tool (see the apt-get line in $0)" >&2; exit 2; }
done
for pkg in google.golang.org/grpc google.golang.org/genproto/googleapis/rpc/errdetails \
  github.com/golang/protobuf/ptypes; do
  [[ -d "/usr/share/gocode/src/$pkg" ]] || { echo "missing Debian Go package for $pkg" >&2; exit 2; }
done

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

clients/go/generate.sh

# GOPATH mode: the module path episodic/clients/go becomes $work/src/episodic/clients/go.
mkdir -p "$work/src/episodic/clients"
ln -s "$repo/clients/go" "$work/src/episodic/clients/go"
(cd "$work/src/episodic/clients/go" &&
  GO111MODULE=off GOPATH="$work:/usr/share/gocode" GOFLAGS= GOCACHE="$work/cache" \
    go build -o "$work/quickstart" ./quickstart)
echo "built clients/go/quickstart with $(go version | cut -d' ' -f3)"

.venv/bin/episodic serve --insecure-dev --address "$address" \
  --database-url "sqlite:///$work/verify.db" --migrate-on-start >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 120); do
  if .venv/bin/grpcurl -plaintext -max-time 2 "$address" grpc.health.v1.Health/Check >/dev/null 2>&1; then
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || { tail -20 "$work/server.log" >&2; exit 1; }
  sleep 1
done

for run in 1 2; do
  echo "--- quickstart run $run"
  "$work/quickstart" "$address" | tee "$work/run$run.txt"
done

# What a working client prints: the streamed context, a search hit, the decoded details.
grep -q 'CONTEXT_SECTION_USER_MESSAGE' "$work/run1.txt"
grep -q '^search found 2 past episode(s)$' "$work/run2.txt"
grep -q 'reason=INVALID_ARGUMENT domain=episodic.v1' "$work/run2.txt"
grep -q 'field user_id: is required' "$work/run2.txt"
echo "Go client verified against $address"
