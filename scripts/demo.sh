#!/usr/bin/env bash
# make demo: installs what it lacks (scripts/demo-prereqs.sh), builds the binaries and the operator
# console, then runs the whole system locally with bin/rxc-dev: PostgreSQL, provisioner,
# nats-server, control plane, console and simulated sensors, all on loopback, state in .demo (run
# again to resume; `make demo-clean` forgets it). Arguments go to rxc-dev (`bin/rxc-dev -h` lists
# them), e.g. scripts/demo.sh -sensors 5, or make demo DEMO_FLAGS="-web-addr 127.0.0.1:8800".
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/demo-prereqs.sh
make --no-print-directory build
make --no-print-directory -C web build
exec bin/rxc-dev "$@"
