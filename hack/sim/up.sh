#!/usr/bin/env bash
# Starts a simulated GPU cluster on 127.0.0.1: etcd, kube-apiserver (RBAC
# on), kube-controller-manager, kube-scheduler and kwok, then creates fake
# GPU nodes carrying what NFD would have labelled, and one untainted system
# node for everything that is not a GPU operand (the operator, helm hooks).
#
# Usage: hack/sim/up.sh [NODES]   (default 4)
# Env:   SIM_DIR (default _output/sim)
#        SIM_BROKEN_DRIVER_NODES: comma-separated node names whose driver pod
#          never becomes ready (for failure scenarios)
#        SIM_NODE_KINDS: extra GPU nodes of other kinds (hack/sim/nodes.sh)
#
# Writes the admin kubeconfig to $SIM_DIR/kubeconfig; hack/sim/down.sh
# stops every process by the pids recorded in $SIM_DIR/pids.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nodes=${1:-4}
dir=${SIM_DIR:-$root/_output/sim}
bin=$root/bin
source "$root/hack/sim/ports.env"

log() { printf '[sim %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -f $dir/pids ]] && kill -0 $(head -1 "$dir/pids" | cut -d' ' -f2) 2>/dev/null; then
  echo "a simulated cluster is already running (pids in $dir/pids); run make sim-down first" >&2
  exit 1
fi
for tool in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok gpu-operator simagent; do
  [[ -x $bin/$tool ]] || { echo "bin/$tool is missing: run make tools-sim build build-sim-agent" >&2; exit 1; }
done

for port in $SIM_ETCD_PORT $SIM_ETCD_PEER_PORT $SIM_APISERVER_PORT $SIM_SCHEDULER_PORT $SIM_KWOK_PORT $SIM_KWOK_NODE_PORT; do
  if (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "127.0.0.1:$port is in use: is another simulated cluster running? (make sim-down, or make demo-down)" >&2
    exit 1
  fi
done

start=$SECONDS
rm -rf "$dir" && mkdir -p "$dir/logs"
"$root/hack/sim/pki.sh" "$dir/pki"
pki=$dir/pki
kubeconfig=$dir/kubeconfig
cat >"$kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: https://127.0.0.1:$SIM_APISERVER_PORT
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: sim
  context: {cluster: sim, user: admin}
current-context: sim
KC

# spawn NAME CMD...: starts a process in the background, logs to
# logs/NAME.log, and records its pid for down.sh.
spawn() {
  local name=$1
  shift
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

# wait_for WHAT CMD...: retries CMD until it succeeds, for 60 s plus a
# second per 10 nodes.
wait_for() {
  local what=$1 deadline=$((SECONDS + 60 + nodes / 10))
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "timed out waiting for $what; logs in $dir/logs" >&2
      exit 1
    fi
    sleep 0.3
  done
}

log "starting etcd"
spawn etcd "$bin/etcd" --name sim --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$SIM_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$SIM_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$SIM_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$SIM_ETCD_PEER_PORT" \
  --initial-cluster "sim=http://127.0.0.1:$SIM_ETCD_PEER_PORT" \
  --auto-compaction-retention=1 --quota-backend-bytes=8589934592 --unsafe-no-fsync

log "starting kube-apiserver"
# The audit log (SIM_AUDIT_POLICY, the benchmark's) is never rotated: the
# API server would rotate it at 100 MB, which 1000 nodes pass in a run, and
# the benchmark counts the whole run from the one file.
spawn kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$SIM_ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$SIM_APISERVER_PORT" \
  --endpoint-reconciler-type none \
  --authorization-mode RBAC --allow-privileged=true \
  --client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range 10.0.0.0/24 \
  --max-requests-inflight=0 --max-mutating-requests-inflight=0 --enable-priority-and-fairness=false \
  ${SIM_AUDIT_POLICY:+--audit-policy-file "$SIM_AUDIT_POLICY" --audit-log-path "$dir/audit.log" --audit-log-maxsize 100000}
wait_for kube-apiserver "$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz

log "starting kube-controller-manager, kube-scheduler and kwok"
# Node leases are sized for a loaded machine: kwok renews a thousand of them,
# and a lease that lapses makes the node lifecycle controller mark the
# node's pods not ready. 120 s leases (renewed every 30 s: kwok v0.8.0
# renews at a quarter of the duration, pkg/kwok/controllers/controller.go)
# and a 4-minute
# grace instead of 40 s and 50 s, up to a thousand nodes; past that the
# lease grows with the nodes, so that kwok renews about as many a second
# as for a thousand (5000 nodes: 600 s, a 20-minute grace). With 120 s
# leases, a 5000-node rollout had 3363 nodes' pods left not ready after 30
# minutes, and more every minute.
lease=$(( nodes > 1000 ? nodes * 120 / 1000 : 120 ))
spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kubeconfig" \
  --leader-elect=false --secure-port=0 --use-service-account-credentials=false \
  --node-monitor-grace-period=$((2 * lease))s \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --kube-api-qps=5000 --kube-api-burst=10000
spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kubeconfig" \
  --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SIM_SCHEDULER_PORT" \
  --kube-api-qps=5000 --kube-api-burst=10000

# kwok leaves alone the driver pods that never load and those on hosts with
# their own driver, which the agent answers.
not_ready=()
for n in $(echo "${SIM_BROKEN_DRIVER_NODES:-}" | tr , " "); do not_ready+=("$n/driver"); done
[[ ,${SIM_NODE_KINDS:-}, == *,host-driver,* ]] && not_ready+=("gpu-host-driver/driver")
stages=$("$root/hack/sim/stages.sh" "$dir/stages" "$(IFS=,; echo "${not_ready[*]}")")
spawn kwok "$bin/kwok" --kubeconfig "$kubeconfig" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip 127.0.0.1 --node-port "$SIM_KWOK_NODE_PORT" --server-address "127.0.0.1:$SIM_KWOK_PORT" \
  --cidr 10.244.0.0/16 --node-lease-duration-seconds "$lease" \
  --tls-cert-file "$pki/kwok.crt" --tls-private-key-file "$pki/kwok.key" \
  --config "$stages"

spawn pod-runner "$root/hack/sim/pod-runner.sh"
spawn simagent "$bin/simagent" --kubeconfig "$kubeconfig"

extra=0
[[ -n ${SIM_NODE_KINDS:-} ]] && extra=$(echo "$SIM_NODE_KINDS" | tr ',' '\n' | grep -c .)
log "creating $nodes fake GPU nodes, $extra of other kinds, and a system node"
"$root/hack/sim/nodes.sh" "$nodes" | "$bin/kubectl" --kubeconfig "$kubeconfig" apply -f - >/dev/null
# One list, counted here: kubectl wait checks nodes one by one, which takes
# longer than its timeout with a thousand of them.
all_nodes_ready() {
  local ready
  ready=$("$bin/kubectl" --kubeconfig "$kubeconfig" get nodes \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')
  ((ready == nodes + extra + 1))
}
wait_for "nodes to be Ready" all_nodes_ready
log "simulated cluster up in $((SECONDS - start))s: $((nodes + extra)) GPU nodes; export KUBECONFIG=$kubeconfig"
