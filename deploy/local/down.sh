#!/usr/bin/env bash
# down.sh — stops the local PostgreSQL and Kafka. Their data stays: the next up.sh starts them
# again with it, on the same ports (kafka.sh wipe removes the broker's).
here=$(dirname "$0")
"$here/kafka.sh" stop
"$here/postgres.sh" stop
