#!/usr/bin/env bash
# Prints the GraphQL schema from the code into schema.graphql (tests fail when the file is stale).
set -euo pipefail
cd "$(dirname "$0")"
cargo run --quiet --bin generate -- graphql > schema.graphql.tmp
mv schema.graphql.tmp schema.graphql
echo "schema.graphql updated" >&2
