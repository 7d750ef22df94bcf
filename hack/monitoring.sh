#!/usr/bin/env bash
# hack/monitoring.sh puts a real prometheus-operator and a Prometheus it manages on the
# cluster of KUBECONFIG (the local one by default), built from the Go modules pinned
# in hack/monitoring/go.mod and hack/prometheus/go.mod (hack/tools.sh monitoring,
# hack/image.sh monitoring):
#
#   hack/monitoring.sh images   the three image references, one a line
#   hack/monitoring.sh up       apply prometheus-operator's CRDs (server-side: they are
#                               too large for a client-side apply's annotation) and its
#                               ClusterRole from the pinned module, then
#                               hack/monitoring/stack.yaml (the operator and Prometheus
#                               "local" in namespace monitoring), and wait until that
#                               Prometheus is available
#   hack/monitoring.sh down     delete them again (the CRDs and every monitor with them)
#
# It is meant for a throwaway cluster such as the local one: it installs cluster-wide
# objects (the monitoring.coreos.com CRDs, ClusterRoles prometheus and
# prometheus-operator, the operator's Service kube-system/kubelet), so do not point
# it at a cluster that already runs a prometheus-operator.
#
# hack/local.sh up runs `up` with MONITORING=1, before it installs the perf-operator
# chart with its ServiceMonitor and PrometheusRule enabled. The nodes must have the
# images (hack/cluster.sh up imports bin/images/*.tar, which hack/image.sh monitoring
# writes).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
MOD="${ROOT}/hack/monitoring"
OPERATOR_MODULE="github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_MODULE="github.com/prometheus/prometheus"
export KUBECONFIG="${KUBECONFIG:-${ROOT}/.state/cluster/admin.kubeconfig}"

log() { echo "monitoring: $*" >&2; }
kubectl() { "${BIN}/kubectl" "$@"; }
# version MODULE_DIR MODULE: the version of MODULE that MODULE_DIR's go.mod pins.
version() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }
moddir() { (cd "${MOD}" && go mod download "$1" && go list -m -f '{{.Dir}}' "$1"); }

# prometheus_version is the Prometheus release of the pinned module: 3.x is released as
# module v0.3MM.P, so v0.314.0 is v3.14.0 (hack/tools.sh stamps the binary with it).
prometheus_version() {
  local v; v="$(version "${ROOT}/hack/prometheus" "${PROMETHEUS_MODULE}")"; v="${v#v0.}"
  echo "v3.$((10#${v%%.*} - 300)).${v#*.}"
}

images() {
  local opv; opv="$(version "${MOD}" "${OPERATOR_MODULE}")"
  echo "perfexp.dev/prometheus-operator:${opv}"
  echo "perfexp.dev/prometheus-config-reloader:${opv}"
  echo "perfexp.dev/prometheus:$(prometheus_version)"
}

up() {
  local t0=${SECONDS} dir refs
  dir="$(moddir "${OPERATOR_MODULE}")"
  mapfile -t refs < <(images)
  log "installing prometheus-operator ${refs[0]##*:} and Prometheus ${refs[2]##*:} in namespace monitoring"
  kubectl apply --server-side --force-conflicts -f "${dir}/example/prometheus-operator-crd/" >/dev/null
  kubectl wait --for condition=Established --timeout 60s -f "${dir}/example/prometheus-operator-crd/" >/dev/null
  kubectl apply --server-side --force-conflicts \
    -f "${dir}/example/rbac/prometheus-operator/prometheus-operator-cluster-role.yaml" >/dev/null
  sed -e "s|@OPERATOR_IMAGE@|${refs[0]}|" -e "s|@RELOADER_IMAGE@|${refs[1]}|" \
    -e "s|@PROMETHEUS_IMAGE@|${refs[2]}|" -e "s|@PROMETHEUS_VERSION@|${refs[2]##*:}|" \
    "${MOD}/stack.yaml" | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n monitoring rollout status deployment/prometheus-operator --timeout 3m >/dev/null
  # The operator creates the StatefulSet prometheus-local and reports the
  # Prometheus Available once its pods are ready.
  kubectl -n monitoring wait --for condition=Available --timeout 5m prometheus/local >/dev/null
  log "Prometheus ready in $((SECONDS - t0))s (service prometheus-operated.monitoring:9090)"
}

down() {
  local dir; dir="$(moddir "${OPERATOR_MODULE}")"
  kubectl delete --ignore-not-found --wait --timeout 2m namespace monitoring >/dev/null
  kubectl delete --ignore-not-found clusterrolebinding/prometheus-operator clusterrolebinding/prometheus \
    clusterrole/prometheus clusterrole/prometheus-operator >/dev/null
  kubectl delete --ignore-not-found -f "${dir}/example/prometheus-operator-crd/" >/dev/null
}

cd "${ROOT}"
case "${1:-}" in
  images) images ;;
  up) up ;;
  down) down ;;
  *) echo "usage: $0 images|up|down" >&2; exit 2 ;;
esac
