#!/usr/bin/env bash
# make bench: Go micro-benchmarks and the load drivers. Results are printed
# and appended to docs/benchmarks-history.md together with the machine they ran on.
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
go test -run '^$' -bench . -benchmem -count 1 ./core/... ./adapters/... ./apps/... | tee /tmp/rxc-gobench.txt

echo "== provisioner load driver"
go run ./bench/provisioner -bin bin/provisioner

echo "== control plane load driver"
# Each simulated sensor's NATS connection costs two descriptors in the one
# process: size the fan-out to the descriptor limit.
fds=$(ulimit -n)
fanout=10000
if [ "$fds" != unlimited ] && [ "$fds" -lt 21000 ]; then fanout=$(( (fds - 1500) / 2 )); fi
go run ./bench/controlplane -fanout "$fanout"

echo "== event pipeline load driver (one gRPC stream → JetStream → PostgreSQL)"
go run ./bench/events

echo "== history retention pass (PostgreSQL, a million audit entries)"
go run ./bench/retention

# Fleet scale: enrolment, a command to every sensor with each command stream
# retention, and the control plane's memory with every sensor connected, each
# next to bare nats-server. With RXC_BENCH_SENSORS=1000 it takes a few
# minutes; the default 10,000 about half an hour on 2 cores.
echo "== fleet scale (${RXC_BENCH_SENSORS:-10000} sensors)"
RXC_NATS_SERVER_BIN="${RXC_BENCH_NATS_SERVER_BIN:-${RXC_NATS_SERVER_BIN:-}}" \
  go run ./bench/fleet -sensors "${RXC_BENCH_SENSORS:-10000}"

# The NATS cluster shape deploy/ ships (three nodes, limits retention, R1
# consumers) next to a bare single node and the earlier shape (work-queue,
# R3 consumers), each on fresh servers in the same run; one node killed to
# time the consumers' recreation; enrolment through the provisioner on the
# shipped shape. About five minutes on 2 cores at 2,000 sensors.
echo "== NATS cluster shapes (${RXC_BENCH_CLUSTER_SENSORS:-2000} sensors)"
RXC_NATS_SERVER_BIN="${RXC_BENCH_NATS_SERVER_BIN:-${RXC_NATS_SERVER_BIN:-}}" \
  go run ./bench/cluster -sensors "${RXC_BENCH_CLUSTER_SENSORS:-2000}"

# nats-server's stop and restart with a durable consumer per sensor, the
# figures deploy/'s grace periods and startup probes are set from
# (docs/operations.md, "Stopping and restarting a nats-server node"): one
# node and the shipped three-node shape, SIGTERM and lame-duck mode, on the
# newest and oldest supported releases. About 30 minutes on 2 cores at
# 10,000 consumers, so only when asked: RXC_BENCH_STOP=1 make bench
# (RXC_BENCH_STOP_CONSUMERS: default 10000).
if [ "${RXC_BENCH_STOP:-}" = 1 ]; then
  echo "== nats-server stop and restart (${RXC_BENCH_STOP_CONSUMERS:-10000} consumers)"
  # The release go.mod pins and the oldest supported one (make test-nats-compat
  # installs it), when present.
  bins="${RXC_BENCH_NATS_SERVER_BIN:-}"
  if [ -x "${RXC_BENCH_NATS_COMPAT_BIN:-}" ]; then bins="$bins,${RXC_BENCH_NATS_COMPAT_BIN}"; fi
  go run ./bench/stop -consumers "${RXC_BENCH_STOP_CONSUMERS:-10000}" -bins "$bins"
fi
