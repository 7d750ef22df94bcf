# hack/cluster/pki.sh: the local cluster's certificates, kubeconfigs and component
# configs, sourced by hack/cluster.sh (which defines STATE, PKI, NODE, NODE_IP and
# the other settings they use).

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
