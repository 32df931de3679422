#!/usr/bin/env bash
# Restart `ccattler server` on a converged world and measure how long its
# engine takes to lead and go idle again, and what it writes meanwhile.
#
#   cmd/ccattler/testdata/bench-restart.sh [BINARY] [SERVICES] [INSTANCES_EACH] [NODES]
#
# Defaults: ./ccattler, 1 service of 10000 instances, on 3 simulated nodes
# (one `ccattler agent --runtime sim` process) with room for all of them.
# The server runs with --insecure on free loopback ports in a temporary data
# directory. Figures go to stdout; the engine's counters come from the
# server's /metrics (--admin-addr). A restarted engine on a converged world
# should fire nothing: every rule's condition already holds.
set -euo pipefail

bin=${1:-./ccattler}
services=${2:-1}
each=${3:-10000}
nodes=${4:-3}
dir=$(mktemp -d /tmp/ccattler-restart-XXXXXX)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
client=$(port) peer=$(port) admin=$(port)
etcd=http://127.0.0.1:$client
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

server() {
	"$bin" server --insecure --data-dir "$dir/data" --listen-client "$etcd" --listen-peer "http://127.0.0.1:$peer" \
		--admin-addr "127.0.0.1:$admin" --log-level warn >>"$dir/server.log" 2>&1 &
	spid=$!
	pids+=("$spid")
}
metric() { # metric NAME: the sum of its samples
	curl -fsS "http://127.0.0.1:$admin/metrics" 2>/dev/null | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%d\n", s }'
}
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
cli() { "$bin" --etcd "$etcd" "$@"; }

server
until cli get nodes >/dev/null 2>&1; do sleep 0.2; done
"$bin" agent --runtime sim --nodes "$nodes" --node-prefix n- --etcd "$etcd" --state-dir "$dir/sim" \
	--cpu 100000 --memory 10000Gi --metrics-interval 0 --max-batch 1000 >>"$dir/agent.log" 2>&1 &
pids+=("$!")
for i in $(seq 1 "$services"); do
	printf 'service "svc-%05d" {\n  image = "nginx:1.28"\n  instances = %d\n  expose = [8080]\n  resources {\n    cpu = 0.001\n    memory = "1Mi"\n  }\n}\n' "$i" "$each"
done >"$dir/services.hcl"
t0=$(now)
cli apply -f "$dir/services.hcl" --wait --timeout 60m >/dev/null
echo "converged: $((services * each)) instances in $(since "$t0") s (load $(cut -d' ' -f1 /proc/loadavg))"

kill -TERM "$spid"
wait "$spid" || true
t0=$(now)
server
until [ "$(metric ccattler_engine_leading)" = 1 ]; do sleep 0.1; done
echo "leading: $(since "$t0") s after the restart"
# Idle: the settled revision has caught up with the last commit and no
# firing for 5 s (the clock ticks every second; rules reading it fire
# only when a deadline passes).
last=-1 quiet=0 idle=
while [ "$quiet" -lt 50 ]; do
	f=$(metric ccattler_engine_firings_total)
	if [ "$f" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0 last=$f idle=$(since "$t0"); fi
	sleep 0.1
done
echo "idle: last firing seen ${idle:-0} s after the restart (load $(cut -d' ' -f1 /proc/loadavg))"
echo "after the restart: rounds $(metric ccattler_engine_rounds_total), full rounds $(metric ccattler_engine_full_rounds_total), firings $last, keys written $(metric ccattler_engine_keys_written_total)"
curl -fsS "http://127.0.0.1:$admin/metrics" | grep '^ccattler_engine_firings_total' | sort -t' ' -k2 -nr | head -10 || true
