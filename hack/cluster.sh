#!/usr/bin/env bash
# hack/cluster.sh runs a real single-node Kubernetes cluster on this machine, built from
# pinned Go modules and Debian packages (no registry, no binary downloads):
#
#   hack/cluster.sh up       start it (idempotent: starts what is not running), wait
#                            for the node to be Ready, import bin/images/*.tar
#   hack/cluster.sh down     delete every pod, stop what up started (by PID, in order),
#                            remove our links, netns, iptables rules and mounts, and
#                            restore the kernel settings up changed
#   hack/cluster.sh status   each component's pid and liveness, and node readiness
#   hack/cluster.sh purge    down, then forget all state (PKI, image store)
#
# State lives in the git-ignored .state/cluster/: PKI, kubeconfigs (admin:
# .state/cluster/admin.kubeconfig), component configs, logs/ (one per component),
# run/ (pid files). down keeps the PKI and containerd's image store so the next up is
# warm; etcd and the kubelet start empty every time.
#
# Confinement: the cluster's traffic never leaves the machine. Pods live on the bridge
# perfexp0 (10.244.0.0/24, gateway and node address 10.244.0.1); the service CIDR
# (10.96.0.0/24) is routed into the empty bridge perfexp-svc0, so a ClusterIP that
# kube-proxy does not translate goes nowhere; the CNI bridge does not masquerade
# (ipMasq: false); the PERFEXP-CONFINE chain, jumped to first from FORWARD, drops
# anything forwarded between the cluster bridge and any other interface; CoreDNS
# answers cluster.local only (no forward plugin, no upstream resolver). Every
# listener binds the bridge address or 127.0.0.1, never the machine's own interfaces.
# Load generated in the cluster can therefore only ever reach cluster pods and
# services. See hack/cluster/README.md.
#
# This machine kind needs (LOCAL-CLUSTER.md): restrict_oom_score_adj in containerd's
# CRI config (no CAP_SYS_RESOURCE), and cgroup v1 kubelet settings.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
STATE="${ROOT}/.state/cluster"
PKI="${STATE}/pki"
LOGS="${STATE}/logs"
RUN="${STATE}/run"
CTRD="${STATE}/containerd"
SOCK="${CTRD}/containerd.sock"
KUBECONFIG_ADMIN="${STATE}/admin.kubeconfig"

NODE="perfexp"
BRIDGE="perfexp0"
SVC_BRIDGE="perfexp-svc0"
POD_CIDR="10.244.0.0/24"
NODE_IP="10.244.0.1"           # the bridge's address: the node, the gateway, the DNS
SERVICE_CIDR="10.96.0.0/24"
KUBERNETES_SVC_IP="10.96.0.1"
CHAIN="PERFEXP-CONFINE"
PAUSE_IMAGE="perfexp.dev/pause:3.10"

# Components in start order; down stops them in reverse, except that pods are deleted
# first and the apiserver is stopped before etcd (it hangs on shutdown otherwise).
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns metrics-server)

# Kernel settings up may change (itself or through the kubelet and kube-proxy); their
# values before the first up are saved and restored by down.
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.ipv4.conf.all.route_localnet
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Host paths the kubelet, containerd or CNI create outside our state directory; those
# that did not exist before up are removed by down.
HOST_PATHS=(/var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /var/run/netns
  /var/lib/cni /etc/cni /opt/cni /etc/kubernetes /var/lib/containerd)

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }
kubectl() { "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }
ctr() { command ctr --address "${SOCK}" "$@"; }

# wait_for SECONDS WHAT CMD...: poll CMD every 0.25 s until it succeeds.
wait_for() {
  local timeout="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for ${what}; logs: ${LOGS}/ (hack/cluster.sh down cleans up)"
      return 1
    fi
    sleep 0.25
  done
}

# Certificates, kubeconfigs and component configs; the network and its confinement.
# shellcheck source=cluster/pki.sh
source "${ROOT}/hack/cluster/pki.sh"
# shellcheck source=cluster/network.sh
source "${ROOT}/hack/cluster/network.sh"

# --- processes --------------------------------------------------------------------

pid_of() { [[ -f "${RUN}/$1.pid" ]] && cat "${RUN}/$1.pid"; }

# running PID: the process exists and is not a zombie (what we start is re-parented to
# PID 1 once up returns, which may reap it only later).
running() { [[ -r "/proc/$1/stat" ]] && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

# alive NAME: the process we started as NAME still runs (and is still that program,
# not a reused PID).
alive() {
  local pid; pid="$(pid_of "$1")" || return 1
  running "${pid}" || return 1
  tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q -- "$1"
}

# start NAME CMD...: start CMD in its own session with its output in logs/NAME.log,
# unless NAME already runs.
start() {
  local name="$1"; shift
  if alive "${name}"; then return 0; fi
  echo "=== $(date -u +%FT%TZ) $*" >>"${LOGS}/${name}.log"
  setsid "$@" >>"${LOGS}/${name}.log" 2>&1 </dev/null &
  echo $! >"${RUN}/${name}.pid"
}

# stop NAME: SIGTERM the process we started, SIGKILL it after 20 s.
stop() {
  local name="$1" pid
  if ! alive "${name}"; then rm -f "${RUN}/${name}.pid"; return 0; fi
  pid="$(pid_of "${name}")"
  kill -TERM "${pid}" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while running "${pid}" && ((SECONDS < deadline)); do sleep 0.1; done
  if running "${pid}"; then
    log "${name} (pid ${pid}) ignored SIGTERM for 20 s; killing it"
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${RUN}/${name}.pid"
}

# --- host preparation ---------------------------------------------------------------

install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v nft >/dev/null || missing+=(nftables)
  command -v openssl >/dev/null || missing+=(openssl)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# save_host_state records, once per up/down cycle, what down must restore.
save_host_state() {
  [[ -f "${RUN}/host.saved" ]] && return 0
  local s p
  : >"${RUN}/sysctls"
  for s in "${SYSCTLS[@]}"; do
    [[ -e "/proc/sys/${s//.//}" ]] && echo "${s}=$(sysctl -n "${s}")" >>"${RUN}/sysctls"
  done
  : >"${RUN}/new-paths"
  for p in "${HOST_PATHS[@]}"; do [[ -e "${p}" ]] || echo "${p}" >>"${RUN}/new-paths"; done
  ip netns list 2>/dev/null | awk '{print $1}' >"${RUN}/netns-before" || true
  nft list tables >"${RUN}/nft-tables-before" 2>/dev/null || true
  touch "${RUN}/host.saved"
}

# --- images -----------------------------------------------------------------------------

# import_images loads bin/images/*.tar into containerd's k8s.io namespace, each only when
# the tarball changed since it was last imported (the store survives down).
import_images() {
  if [[ ! -f "${BIN}/images/pause.tar" ]]; then
    [[ -x "${ROOT}/hack/image.sh" ]] || die "no ${BIN}/images/pause.tar and no hack/image.sh to build it"
    "${ROOT}/hack/image.sh" pause
  fi
  mkdir -p "${CTRD}/imported"
  local tar name sum
  for tar in "${BIN}"/images/*.tar; do
    name="$(basename "${tar}" .tar)"
    sum="$(sha256sum "${tar}" | cut -d' ' -f1)"
    [[ "$(cat "${CTRD}/imported/${name}" 2>/dev/null)" == "${sum}" ]] && continue
    log "importing image ${name}"
    ctr -n k8s.io images import "${tar}" >>"${LOGS}/images.log"
    echo "${sum}" >"${CTRD}/imported/${name}"
  done
}

# --- up -----------------------------------------------------------------------------------

apiserver_ready() { kubectl get --raw /readyz; }
node_ready() {
  [[ "$(kubectl get node "${NODE}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

up() {
  local t0=${SECONDS} cold=warm
  [[ -s "${PKI}/ca.crt" && -d "${CTRD}/root" ]] || cold=cold
  install_packages
  "${ROOT}/hack/tools.sh" cluster
  mkdir -p "${LOGS}" "${RUN}"
  save_host_state
  pki
  configs
  network_up

  start etcd "${BIN}/etcd" --name "${NODE}" --data-dir "${STATE}/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "${NODE}=http://127.0.0.1:2380" \
    --unsafe-no-fsync --log-level warn
  start containerd containerd --config "${CTRD}/config.toml"
  wait_for 30 etcd curl -sf http://127.0.0.1:2379/health

  start kube-apiserver "${BIN}/kube-apiserver" \
    --advertise-address "${NODE_IP}" --bind-address "${NODE_IP}" --secure-port 6443 \
    --etcd-servers http://127.0.0.1:2379 \
    --authorization-mode Node,RBAC --allow-privileged \
    --client-ca-file "${PKI}/ca.crt" \
    --tls-cert-file "${PKI}/apiserver.crt" --tls-private-key-file "${PKI}/apiserver.key" \
    --kubelet-client-certificate "${PKI}/apiserver-kubelet-client.crt" \
    --kubelet-client-key "${PKI}/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "${PKI}/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "${SERVICE_CIDR}" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "${PKI}/sa.pub" --service-account-signing-key-file "${PKI}/sa.key" \
    --requestheader-client-ca-file "${PKI}/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "${PKI}/front-proxy-client.crt" \
    --proxy-client-key-file "${PKI}/front-proxy-client.key" \
    --enable-aggregator-routing --profiling=false
  wait_for 30 containerd test -S "${SOCK}"
  import_images
  wait_for 90 kube-apiserver apiserver_ready

  sed -e "s|@CA_BUNDLE@|$(base64 -w0 "${PKI}/ca.crt")|" -e "s|@NODE_IP@|${NODE_IP}|" \
    "${ROOT}/hack/cluster/addons.yaml" | kubectl apply --server-side --force-conflicts -f - >/dev/null

  # StaleControllerConsistency (beta, on by default since 1.36) makes the
  # ReplicaSet and Job controllers requeue, with exponential backoff, while
  # their informers trail their own writes. On a starved 2-core node the
  # trailing can last long enough for that backoff to reach minutes, leaving
  # a ReplicaSet's ready count unsynced. The requeues show locally as "read
  # version ... is not as new as written version" in the controller-manager
  # log; the likely result showed in one CI run as a Deployment stuck at 0/2
  # available for 3 minutes though its pods had started. One
  # controller-manager on one node is served by the older expectations
  # mechanism alone.
  start kube-controller-manager "${BIN}/kube-controller-manager" \
    --feature-gates StaleControllerConsistencyReplicaSet=false,StaleControllerConsistencyJob=false \
    --kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authorization-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --root-ca-file "${PKI}/ca.crt" --service-account-private-key-file "${PKI}/sa.key" \
    --cluster-signing-cert-file "${PKI}/ca.crt" --cluster-signing-key-file "${PKI}/ca.key" \
    --service-cluster-ip-range "${SERVICE_CIDR}" --profiling=false
  start kube-scheduler "${BIN}/kube-scheduler" \
    --kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authorization-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  start kubelet "${BIN}/kubelet" --config "${STATE}/kubelet/config.yaml" \
    --kubeconfig "${STATE}/kubelet.kubeconfig" --root-dir "${STATE}/kubelet/root" \
    --cert-dir "${STATE}/kubelet/pki" --hostname-override "${NODE}" --node-ip "${NODE_IP}"
  start kube-proxy "${BIN}/kube-proxy" --config "${STATE}/kube-proxy.yaml"
  start coredns "${BIN}/coredns" -conf "${STATE}/Corefile"
  start metrics-server "${BIN}/metrics-server" \
    --kubeconfig "${STATE}/metrics-server.kubeconfig" \
    --authentication-kubeconfig "${STATE}/metrics-server.kubeconfig" \
    --authorization-kubeconfig "${STATE}/metrics-server.kubeconfig" \
    --bind-address "${NODE_IP}" --secure-port 4443 \
    --tls-cert-file "${PKI}/metrics-server.crt" --tls-private-key-file "${PKI}/metrics-server.key" \
    --kubelet-certificate-authority "${PKI}/ca.crt" \
    --kubelet-preferred-address-types InternalIP --metric-resolution 10s --kubelet-request-timeout 5s

  wait_for 120 "node ${NODE} Ready" node_ready
  # Pods in a namespace need its default ServiceAccount and the root CA ConfigMap,
  # which the controller-manager creates shortly after it starts.
  wait_for 60 "the default ServiceAccount" kubectl get serviceaccount default -n default
  wait_for 60 "the kube-root-ca.crt ConfigMap" kubectl get configmap kube-root-ca.crt -n default
  wait_for 60 "cluster DNS" curl -sf http://127.0.0.1:18181/ready
  wait_for 90 "metrics-server behind the aggregator" \
    kubectl wait --for condition=Available --timeout=2s apiservice/v1beta1.metrics.k8s.io
  log "up (${cold}) in $((SECONDS - t0))s; export KUBECONFIG=${KUBECONFIG_ADMIN}"
}

# --- down ---------------------------------------------------------------------------------

# delete_pods deletes every pod and waits until the kubelet has torn each sandbox down
# (network namespace, veth, IP), which it only does while it runs.
delete_pods() {
  alive kube-apiserver && apiserver_ready >/dev/null 2>&1 || return 0
  alive kubelet || return 0
  # Controllers would replace the pods, the scheduler would place the replacements.
  stop kube-scheduler
  stop kube-controller-manager
  kubectl delete pods --all --all-namespaces --wait --timeout 90s >/dev/null 2>&1 || {
    log "pods did not go away gracefully; forcing"
    kubectl delete pods --all --all-namespaces --grace-period 0 --force --wait --timeout 30s >/dev/null 2>&1 || true
  }
  alive containerd || return 0
  # The kubelet stops sandboxes of deleted pods right away; wait for that.
  wait_for 60 "pod sandboxes to stop" no_running_tasks || true
}

no_running_tasks() { ! ctr -n k8s.io tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING"' | grep -q .; }

# cleanup_containerd removes what the kubelet left in containerd's metadata and kills
# shims of our containerd that outlived it (they are not its children).
cleanup_containerd() {
  if alive containerd; then
    local id
    for id in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -n k8s.io tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true
      ctr -n k8s.io tasks delete -f "${id}" >/dev/null 2>&1 || true
    done
    for id in $(ctr -n k8s.io containers ls -q 2>/dev/null); do
      ctr -n k8s.io containers delete "${id}" >/dev/null 2>&1 || true
    done
  fi
}

kill_our_shims() {
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address ${SOCK}" || true); do
    kill -KILL "${pid}" 2>/dev/null || true
  done
}

host_down() {
  local m s p
  # Mounts the kubelet and containerd left under our state (volumes, rootfs, shm).
  for m in $(findmnt -rn -o TARGET | grep -E "^(${STATE}|/run/containerd|/var/run/netns)/" | sort -r || true); do
    umount -l "${m}" 2>/dev/null || true
  done
  # The kubelet's pod cgroups (cgroup v1: one tree per controller).
  for p in /sys/fs/cgroup/*/kubepods; do
    [[ -d "${p}" ]] && find "${p}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [[ -f "${RUN}/sysctls" ]]; then
    while IFS='=' read -r s p; do sysctl -qw "${s}=${p}" 2>/dev/null || log "could not restore ${s}=${p}"; done <"${RUN}/sysctls"
  fi
  if [[ -f "${RUN}/new-paths" ]]; then
    while read -r p; do [[ -n "${p}" ]] && rm -rf "${p}"; done <"${RUN}/new-paths"
  fi
  rm -f "${RUN}/host.saved" "${RUN}/sysctls" "${RUN}/new-paths" "${RUN}/netns-before" "${RUN}/nft-tables-before"
}

down() {
  local t0=${SECONDS}
  [[ -d "${RUN}" ]] || { log "not up"; return 0; }
  delete_pods
  stop metrics-server
  stop coredns
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-proxy
  stop kubelet
  cleanup_containerd
  stop containerd
  kill_our_shims
  stop kube-apiserver
  stop etcd
  network_down
  host_down
  # A fresh cluster every up: etcd, the kubelet's and CNI's runtime state go; the PKI and
  # containerd's image store stay.
  rm -rf "${STATE}/etcd" "${STATE}/kubelet" "${STATE}/cni/ipam" "${CTRD}/state"
  log "down in $((SECONDS - t0))s"
}

status() {
  local c
  for c in "${COMPONENTS[@]}"; do
    if alive "${c}"; then
      printf '%-24s pid %-8s alive\n' "${c}" "$(pid_of "${c}")"
    else
      printf '%-24s %-12s not running\n' "${c}" "-"
    fi
  done
  if alive kube-apiserver && apiserver_ready >/dev/null 2>&1; then
    kubectl get nodes -o wide 2>/dev/null || true
  else
    echo "apiserver: not ready"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  purge) down; rm -rf "${STATE}" ;;
  *) echo "usage: $0 up|down|status|purge" >&2; exit 2 ;;
esac
