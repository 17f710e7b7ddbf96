#!/usr/bin/env bash
# Installs PostgreSQL from Debian's packages when it is missing, starts the newest cluster, and gives the
# `postgres` role the password the tests use. Idempotent: does nothing that is already done.
set -euo pipefail

password="${TEST_DATABASE_PASSWORD:-postgres}"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "installing PostgreSQL from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$version main"; then
  as_root pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -q online; then
  as_root pg_ctlcluster "$version" main start
fi

for _ in $(seq 1 60); do
  pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 0.5
done
pg_isready -h 127.0.0.1 -p 5432 >&2
as_root runuser -u postgres -- psql -q -c "ALTER USER postgres PASSWORD '${password}'" >/dev/null
echo "PostgreSQL ${version} is running on 127.0.0.1:5432" >&2
