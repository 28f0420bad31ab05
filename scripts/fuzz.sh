#!/usr/bin/env bash
# The long fuzzing run: every RPC of the episodic.v1 services (discovered from the
# descriptors) gets --examples generated hostile or plausible requests against a real
# `episodic serve` subprocess on a throwaway database, then prints the per-RPC table.
# Exits 1 on any INTERNAL/UNKNOWN status, a failed health check, a server crash, or a
# partial write. The fast slice of the same fuzzing runs in CI: tests/fuzz/.
#
# Usage: scripts/fuzz.sh [--examples 10000] [--backend sqlite|postgres] [--seed N]
#                        [--batch 200] [--concurrency 8] [--workers N] [--only RPC-NAME-PART]
# (PostgreSQL: the admin URL is EPISODIC_TEST_POSTGRES_URL, default postgres@127.0.0.1:5432.)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
[[ -x "$python" ]] || python="$(command -v python3)"
exec "$python" -m tests.fuzz.runner --examples 10000 --batch 200 "$@"
