#!/usr/bin/env bash
# hack/quickstart.sh is the README's main job: one real experiment, end to end.
#
#   1. hack/local.sh up: builds everything from pinned Go modules and Debian packages,
#      brings up the local single-node cluster (unless KUBECONFIG names one) and
#      installs the operator with its Helm chart;
#   2. deploys the sample target the example names (examples/local/toy.yaml, or
#      jvm.yaml for the JVM examples) and applies the example (EXAMPLE, default
#      examples/local/profiling-overhead.yaml);
#   3. follows it to the end, printing each phase, and prints `kubectl perf report`;
#      the plot goes to .state/quickstart/<name>.svg;
#   4. stops the local cluster (KEEP=1 leaves it running; `make cluster-down` stops it).
#
# It exits non-zero unless the experiment ends Succeeded.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
STATE="${ROOT}/.state/quickstart"
mkdir -p "${STATE}"
EXAMPLE="${EXAMPLE:-examples/local/profiling-overhead.yaml}"
TIMEOUT="${TIMEOUT:-1800}" # seconds the experiment may take

started_local=""
[[ -z "${KUBECONFIG:-}" ]] && started_local=yes
cleanup() {
  if [[ -n "${started_local}" && -z "${KEEP:-}" ]]; then
    echo "==> stopping the local cluster (KEEP=1 leaves it running)"
    hack/local.sh down || true
  fi
}
trap cleanup EXIT

t0=${SECONDS}
DEPLOYMENT="$(sed -n 's/^    deployment: *//p' "${EXAMPLE}" | head -1)"
if [[ "${DEPLOYMENT}" == jvmapp ]]; then
  echo "==> the JVM sample app's image (hack/image.sh jvm: debootstrap, apt, Maven)"
  hack/image.sh jvm
fi
echo "==> bringing up the cluster and installing the operator (hack/local.sh up)"
hack/local.sh up
[[ -n "${started_local}" ]] && export KUBECONFIG="${ROOT}/.state/cluster/admin.kubeconfig"
KUBECTL="${ROOT}/bin/kubectl"
go build -o "${STATE}/kubectl-perf" ./cmd/kubectl-perf
echo "    ready after $((SECONDS - t0))s"

NS="$(sed -n 's/^  namespace: *//p' "${EXAMPLE}" | head -1)"
NAME="$(sed -n 's/^  name: *//p' "${EXAMPLE}" | head -1)"
if [[ "${NS}" == perf-demo ]]; then
  # The sample target is the examples/local file that defines that Deployment:
  # toy.yaml (toy) or jvm.yaml (jvmapp).
  target="$(grep -l "^  name: ${DEPLOYMENT}\$" examples/local/*.yaml | xargs grep -l '^kind: Deployment' | head -1)"
  [[ -n "${target}" ]] || { echo "no examples/local file defines Deployment ${DEPLOYMENT}" >&2; exit 1; }
  echo "==> the sample target: kubectl apply -f ${target}"
  "${KUBECTL}" apply -f "${target}"
  "${KUBECTL}" -n "${NS}" rollout status "deployment/${DEPLOYMENT}" --timeout=180s
fi
# A rerun starts the experiment afresh.
"${KUBECTL}" -n "${NS}" delete perfexperiment "${NAME}" --ignore-not-found --wait=true >/dev/null

echo "==> kubectl apply -f ${EXAMPLE}"
"${KUBECTL}" apply -f "${EXAMPLE}"
start=${SECONDS}
last=""
while :; do
  line="$("${KUBECTL}" -n "${NS}" get perfexperiment "${NAME}" \
    -o jsonpath='{.status.phase} {.status.currentStage}{range .status.conditions[?(@.type=="Reconciling")]} — {.message}{end}')"
  phase="${line%% *}"
  if [[ "${line}" != "${last}" ]]; then
    printf '    %4ds  %s\n' "$((SECONDS - start))" "${line}"
    last="${line}"
  fi
  case "${phase}" in Succeeded | Failed | Aborted) break ;; esac
  if (( SECONDS - start > TIMEOUT )); then
    echo "quickstart: the experiment did not end within ${TIMEOUT}s" >&2
    exit 1
  fi
  sleep 5
done

echo
echo "==> kubectl perf report -n ${NS} ${NAME}"
"${STATE}/kubectl-perf" report -n "${NS}" "${NAME}" --plot "${STATE}/${NAME}.svg" | tee "${STATE}/${NAME}.txt"
echo
echo "plot: ${STATE#"${ROOT}/"}/${NAME}.svg   report: ${STATE#"${ROOT}/"}/${NAME}.txt   total: $((SECONDS - t0))s"
[[ "${phase}" == Succeeded ]] || { echo "quickstart: the experiment ended ${phase}" >&2; exit 1; }
