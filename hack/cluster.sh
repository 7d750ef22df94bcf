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

network_up() {
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  if ! ip link show "${BRIDGE}" >/dev/null 2>&1; then
    ip link add "${BRIDGE}" type bridge
  fi
  ip addr replace "${NODE_IP}/24" dev "${BRIDGE}"
  ip link set "${BRIDGE}" up
  if ! ip link show "${SVC_BRIDGE}" >/dev/null 2>&1; then
    ip link add "${SVC_BRIDGE}" type bridge
  fi
  ip link set "${SVC_BRIDGE}" up
  ip route replace "${SERVICE_CIDR}" dev "${SVC_BRIDGE}"
  # The confinement rule: nothing is forwarded between the cluster bridge and any other
  # interface, in either direction.
  iptables -w -N "${CHAIN}" 2>/dev/null || iptables -w -F "${CHAIN}"
  iptables -w -A "${CHAIN}" -i "${BRIDGE}" ! -o "${BRIDGE}" -j DROP \
    -m comment --comment "perfexp: cluster traffic stays on the cluster bridge"
  iptables -w -A "${CHAIN}" -o "${BRIDGE}" ! -i "${BRIDGE}" -j DROP \
    -m comment --comment "perfexp: nothing from outside reaches the cluster bridge"
  iptables -w -C FORWARD -j "${CHAIN}" 2>/dev/null || iptables -w -I FORWARD 1 -j "${CHAIN}"
}

# --- PKI, kubeconfigs, configs --------------------------------------------------------

# cert NAME CN O EXTENDED_USAGE [SAN]: an EC key and a certificate signed by our CA.
cert() {
  local name="$1" cn="$2" o="$3" usage="$4" san="${5:-}"
  [[ -s "${PKI}/${name}.crt" ]] && return 0
  local subj="/CN=${cn}"; [[ -n "${o}" ]] && subj+="/O=${o}"
  openssl ecparam -name prime256v1 -genkey -noout -out "${PKI}/${name}.key"
  openssl req -new -key "${PKI}/${name}.key" -subj "${subj}" -out "${PKI}/${name}.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=${usage}"
    [[ -n "${san}" ]] && echo "subjectAltName=${san}"
  } >"${PKI}/${name}.ext"
  openssl x509 -req -in "${PKI}/${name}.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "${PKI}/${name}.ext" -out "${PKI}/${name}.crt" 2>/dev/null
  rm -f "${PKI}/${name}.csr" "${PKI}/${name}.ext"
}

pki() {
  mkdir -p "${PKI}"
  if [[ ! -s "${PKI}/ca.crt" ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "${PKI}/ca.key"
    openssl req -x509 -new -key "${PKI}/ca.key" -subj "/CN=perfexp-cluster-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "${PKI}/ca.crt"
  fi
  cert apiserver kube-apiserver "" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:${KUBERNETES_SVC_IP},IP:${NODE_IP},IP:127.0.0.1"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  cert front-proxy-client front-proxy-client "" clientAuth
  cert admin perfexp-admin system:masters clientAuth
  cert controller-manager system:kube-controller-manager "" clientAuth
  cert scheduler system:kube-scheduler "" clientAuth
  cert kubelet "system:node:${NODE}" system:nodes serverAuth,clientAuth "DNS:${NODE},IP:${NODE_IP}"
  cert kube-proxy system:kube-proxy "" clientAuth
  cert coredns perfexp:coredns "" clientAuth
  cert metrics-server perfexp:metrics-server "" serverAuth,clientAuth \
    "DNS:metrics-server.kube-system.svc,IP:${NODE_IP}"
  if [[ ! -s "${PKI}/sa.key" ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "${PKI}/sa.key"
    openssl ec -in "${PKI}/sa.key" -pubout -out "${PKI}/sa.pub" 2>/dev/null
  fi
}

# kubeconfig NAME CERT: a kubeconfig with the CA and client certificate embedded, so
# it can be copied anywhere on this machine.
kubeconfig() {
  local out="${STATE}/$1.kubeconfig" c="$2"
  cat >"${out}" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: perfexp
    cluster:
      server: https://${NODE_IP}:6443
      certificate-authority-data: $(base64 -w0 "${PKI}/ca.crt")
users:
  - name: $1
    user:
      client-certificate-data: $(base64 -w0 "${PKI}/${c}.crt")
      client-key-data: $(base64 -w0 "${PKI}/${c}.key")
contexts:
  - name: perfexp
    context: {cluster: perfexp, user: $1}
current-context: perfexp
EOF
}

configs() {
  local c
  for c in admin controller-manager scheduler kubelet kube-proxy coredns metrics-server; do
    kubeconfig "${c}" "${c}"
  done
  mkdir -p "${STATE}/cni/net.d" "${STATE}/cni/ipam" "${STATE}/kubelet" "${CTRD}"

  # Pods get one route, the default one, through the node: the only way out of a pod
  # is through the node's forwarding, where PERFEXP-CONFINE drops anything not bound
  # for the cluster bridge.
  cat >"${STATE}/cni/net.d/10-perfexp.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "perfexp",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${NODE_IP}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "${STATE}/cni/ipam"
      }
    }
  ]
}
EOF

  cat >"${CTRD}/config.toml" <<EOF
# containerd for hack/cluster.sh only: its own root, state and socket, so a system
# containerd (if any) is not touched.
version = 2
root = "${CTRD}/root"
state = "${CTRD}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "${SOCK}"

[plugins."io.containerd.internal.v1.opt"]
  path = "${CTRD}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # This machine kind lacks CAP_SYS_RESOURCE: without this every sandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${STATE}/cni/net.d"
    max_conf_num = 1
EOF

  # No upstream resolver: pods resolve cluster names only.
  : >"${STATE}/kubelet/resolv.conf"
  cat >"${STATE}/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${PKI}/kubelet.crt
tlsPrivateKeyFile: ${PKI}/kubelet.key
containerRuntimeEndpoint: unix://${SOCK}
# cgroup v1 is all this machine kind has.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [${NODE_IP}]
resolvConf: ${STATE}/kubelet/resolv.conf
podLogsDir: ${STATE}/kubelet/pod-logs
# Images are imported, never pulled: never collect them, and do not let a busy shared
# disk put the node under pressure.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
serializeImagePulls: false
EOF

  cat >"${STATE}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${STATE}/kube-proxy.kubeconfig}
hostnameOverride: ${NODE}
mode: iptables
clusterCIDR: ${POD_CIDR}
bindAddress: ${NODE_IP}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [${NODE_IP}/32]
# Leave the machine's conntrack and route_localnet settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF

  cat >"${STATE}/Corefile" <<EOF
# Cluster names only: no forward plugin, so nothing is resolved upstream.
.:53 {
    bind ${NODE_IP}
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${STATE}/coredns.kubeconfig
        pods insecure
    }
    cache 30
}
EOF
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

network_down() {
  local link ns
  # veths of pods the kubelet did not tear down.
  for link in $(ip -o link show master "${BRIDGE}" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link delete "${link}" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do
    grep -qx "${ns}" "${RUN}/netns-before" 2>/dev/null || ip netns delete "${ns}" 2>/dev/null || true
  done
  ip route del "${SERVICE_CIDR}" dev "${SVC_BRIDGE}" 2>/dev/null || true
  ip link delete "${SVC_BRIDGE}" 2>/dev/null || true
  ip link delete "${BRIDGE}" 2>/dev/null || true
  while iptables -w -D FORWARD -j "${CHAIN}" 2>/dev/null; do :; done
  iptables -w -F "${CHAIN}" 2>/dev/null || true
  iptables -w -X "${CHAIN}" 2>/dev/null || true
  # kube-proxy removes its own rules; the kubelet's canary chains and anything CNI left
  # (KUBE-*, CNI-* exist only because of this cluster) go here.
  "${BIN}/kube-proxy" --cleanup >>"${LOGS}/kube-proxy.log" 2>&1 || true
  remove_chains 'KUBE-|CNI-'
  remove_new_tables
}

# remove_chains REGEX: delete every rule jumping to, and every chain named, REGEX, for
# IPv4 and IPv6 (the kubelet's canary chains exist in both).
remove_chains() {
  local cmd table rules chains c
  for cmd in iptables ip6tables; do
    for table in filter nat mangle raw; do
      rules="$("${cmd}-save" -t "${table}" 2>/dev/null | grep -E "^-A .* -j (${1})" || true)"
      while read -r rule; do
        [[ -n "${rule}" ]] || continue
        # A saved rule is shell-quoted (comments hold spaces): let the shell split it.
        eval "${cmd} -w -t ${table} ${rule/#-A/-D}" 2>/dev/null || true
      done <<<"${rules}"
      chains="$("${cmd}-save" -t "${table}" 2>/dev/null | sed -n 's/^:\([^ ]*\) .*/\1/p' | grep -E "^(${1})" || true)"
      for c in ${chains}; do "${cmd}" -w -t "${table}" -F "${c}" 2>/dev/null || true; done
      for c in ${chains}; do "${cmd}" -w -t "${table}" -X "${c}" 2>/dev/null || true; done
    done
  done
}

# remove_new_tables deletes the nftables tables (iptables-nft's "ip nat", "ip6 mangle",
# ...) that did not exist before up, once nothing but base chains is left in them.
remove_new_tables() {
  [[ -f "${RUN}/nft-tables-before" ]] || return 0
  local fam name
  while read -r _ fam name; do
    [[ -n "${name}" ]] || continue
    grep -qx "table ${fam} ${name}" "${RUN}/nft-tables-before" && continue
    if nft list table "${fam}" "${name}" | grep -qvE '^[[:space:]]*(#.*|table .*|chain [A-Z]+ \{|type .*|\}|)$'; then
      log "keeping nftables table ${fam} ${name}: it is not empty"
      continue
    fi
    nft delete table "${fam}" "${name}" || true
  done < <(nft list tables 2>/dev/null)
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
