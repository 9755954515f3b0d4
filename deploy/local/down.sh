#!/usr/bin/env bash
# down.sh — stops the local PostgreSQL and Kafka (their data stays in .run/ until removed).
here=$(dirname "$0")
"$here/kafka.sh" stop
"$here/postgres.sh" stop
