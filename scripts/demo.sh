#!/usr/bin/env bash
# make demo: installs what it lacks (scripts/demo-prereqs.sh), builds the binaries and the operator
# console (the console only when one of its sources changed), then runs the whole system locally
# with bin/rxc-dev: PostgreSQL, provisioner, nats-server, control plane, console and simulated
# sensors, all on loopback, state in .demo (run again to resume; `make demo-clean` forgets it).
# Each step says what it does and how long it took. Arguments go to rxc-dev; `scripts/demo.sh -h`
# (or make demo DEMO_FLAGS=-h) lists them without building anything first, e.g.
# scripts/demo.sh -sensors 5, or make demo DEMO_FLAGS="-web-addr 127.0.0.1:8800".
set -euo pipefail
cd "$(dirname "$0")/.."

for a in "$@"; do
	case "$a" in
	-h | -help | --help)
		# Help straight from the source: nothing is built or started.
		exec go run ./apps/rxc-dev -h
		;;
	esac
done

step() {
	local what=$1 t0=$SECONDS
	shift
	echo "demo: ${what}…" >&2
	"$@"
	echo "demo: ${what}: done in $((SECONDS - t0)) s" >&2
}

step "checking prerequisites (Yarn, PostgreSQL)" scripts/demo-prereqs.sh
step "building the Go binaries into bin/ (the first build takes a few minutes)" make --no-print-directory build
step "building the console into web/dist (skipped when nothing in web/ changed)" make --no-print-directory -C web build
echo "demo: starting the stack (PostgreSQL, provisioner, nats-server, control plane, console, sensors)…" >&2
exec bin/rxc-dev "$@"
