#!/usr/bin/env bash
# make demo: builds the binaries and the operator console, then runs the whole system locally
# with bin/rxc-dev: PostgreSQL, provisioner, nats-server, control plane, console and simulated
# sensors, all on loopback, state in .demo (run again to resume; `make demo-clean` forgets it).
# Arguments go to rxc-dev (`bin/rxc-dev -h` lists them), e.g. scripts/demo.sh --sensors 5.
set -euo pipefail
cd "$(dirname "$0")/.."

make --no-print-directory build
if command -v yarn >/dev/null 2>&1; then
	make --no-print-directory -C web build
elif [ -f web/dist/index.html ]; then
	echo "demo: yarn is missing (npm i -g yarn@1.22.22); serving the existing web/dist" >&2
else
	echo "demo: yarn is missing (npm i -g yarn@1.22.22); the console will not be served" >&2
fi
exec bin/rxc-dev "$@"
