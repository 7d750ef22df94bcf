# hack/cluster/network.sh: the local cluster's network, sourced by hack/cluster.sh
# (which defines BRIDGE, SVC_BRIDGE, NODE_IP, SERVICE_CIDR, CHAIN, RUN, LOGS and
# BIN): the pod bridge, the service CIDR routed into an empty bridge, and the
# confinement chain that keeps every packet on the cluster bridge; and their
# removal, with what the kubelet, CNI and kube-proxy left behind.

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
