#!/usr/bin/env bash
# up.sh — starts (idempotently) the local PostgreSQL and Kafka and prints the environment
# the tests and the demo read:   eval "$(deploy/local/up.sh)"
set -euo pipefail
here=$(dirname "$0")
"$here/postgres.sh" start
"$here/kafka.sh" start
