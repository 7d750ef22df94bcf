#!/usr/bin/env bash
# hack/local.sh puts the operator on a real cluster: the README's main job and the e2e
# suite start here.
#
#   hack/local.sh up    build the images (operator, k6, toy app, pause), bring up the
#                       local single-node cluster (hack/cluster.sh up, which imports
#                       them) and install or upgrade the operator with its Helm chart.
#                       Idempotent: on a running cluster it rebuilds what changed and
#                       upgrades the release.
#   hack/local.sh down  stop the local cluster (the operator goes with it); with
#                       KUBECONFIG, uninstall the operator from that cluster instead
#
# MONITORING=1 (opt-in: its first build takes several minutes) adds the monitoring
# stack the chart targets: prometheus-operator and a Prometheus built from their Go
# modules (hack/monitoring.sh), installed before the operator, whose chart then gets
# its ServiceMonitor and PrometheusRule (`release: kube-prometheus-stack`, which that
# Prometheus selects). Prometheus answers at prometheus-operated.monitoring:9090.
#
# With KUBECONFIG set, that cluster is used and no local one is started. Its nodes
# must already have the images bin/images/*.tar holds (for kind: `kind load
# image-archive`), or IMAGE_REPOSITORY/IMAGE_TAG must name an operator image it can pull.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
NAMESPACE="perf-operator-system"
RELEASE="perf-operator"
LOCAL_KUBECONFIG="${ROOT}/.state/cluster/admin.kubeconfig"

log() { echo "local: $*" >&2; }

# target says which cluster: "external" with KUBECONFIG set, else "local".
target() { if [[ -n "${KUBECONFIG:-}" && "${KUBECONFIG}" != "${LOCAL_KUBECONFIG}" ]]; then echo external; else echo local; fi; }

# images builds every image archive (hack/image.sh builds ociimage and k6 itself).
images() {
  hack/image.sh all
  if monitoring; then hack/image.sh monitoring; fi
}

monitoring() { [[ "${MONITORING:-}" == 1 ]]; }

install() {
  hack/tools.sh helm
  local args=()
  if [[ "$(target)" == local ]]; then
    export KUBECONFIG="${LOCAL_KUBECONFIG}"
    # Imported into the node's containerd by hack/cluster.sh up: never pull.
    args+=(--set image.pullPolicy=Never)
    # The JVM examples flip JFR with jcmd through an exec toggle; a throwaway
    # local cluster can grant pods/exec. Elsewhere it stays the chart's opt-in.
    args+=(--set toggles.exec.enabled=true)
  fi
  if monitoring; then
    # Scraped every 10 s (the local Prometheus' interval), so a test sees the
    # operator's series within seconds.
    args+=(--set monitoring.serviceMonitor.enabled=true --set monitoring.serviceMonitor.interval=10s
      --set monitoring.prometheusRule.enabled=true)
  fi
  [[ -n "${IMAGE_REPOSITORY:-}" ]] && args+=(--set "image.repository=${IMAGE_REPOSITORY}")
  [[ -n "${IMAGE_TAG:-}" ]] && args+=(--set "image.tag=${IMAGE_TAG}")
  # The image's digest as a pod annotation: a rebuilt operator image (same tag) rolls
  # the Deployment on upgrade.
  local sum
  sum="$(sha256sum "${BIN}/images/manager.tar" | cut -c1-16)"
  log "installing the operator (Helm release ${RELEASE} in ${NAMESPACE})"
  local t0=${SECONDS}
  "${BIN}/helm" upgrade --install "${RELEASE}" "${ROOT}/charts/perf-operator" \
    --namespace "${NAMESPACE}" --create-namespace \
    --set-string "podAnnotations.perfexp\.dev/image-archive=${sum}" \
    "${args[@]}" --wait --timeout 5m
  log "operator ready in $((SECONDS - t0))s"
}

up() {
  cd "${ROOT}"
  images
  if [[ "$(target)" == local ]]; then
    hack/cluster.sh up
  else
    log "using the cluster of KUBECONFIG=${KUBECONFIG}"
  fi
  if monitoring; then hack/monitoring.sh up; fi
  install
}

down() {
  cd "${ROOT}"
  if [[ "$(target)" == external ]]; then
    "${BIN}/helm" uninstall "${RELEASE}" --namespace "${NAMESPACE}" --wait || true
    if monitoring; then hack/monitoring.sh down; fi
    return 0
  fi
  # Everything, operator included, goes with the local cluster (pods first).
  hack/cluster.sh down
}

cd "${ROOT}"
case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
