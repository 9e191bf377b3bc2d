#!/usr/bin/env bash
# make bench: Go micro-benchmarks and the load drivers. Results are printed
# and appended to docs/benchmarks.md together with the machine they ran on.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "bench needs: ${need[*]} (Debian packages)" >&2; exit 1
  fi
fi

echo "== Go benchmarks"
go test -run '^$' -bench . -benchmem -count 1 ./core/... ./adapters/... | tee /tmp/rxc-gobench.txt

echo "== provisioner load driver"
go run ./bench/provisioner -bin bin/provisioner "$@"

echo "== event pipeline load driver (one gRPC stream → JetStream → PostgreSQL)"
go run ./bench/events
