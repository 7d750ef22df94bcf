#!/usr/bin/env bash
# hack/quickstart.sh is the README's main job: it builds what it needs from source,
# starts a local control plane (kube-apiserver + etcd, CRDs installed), runs the
# operator against it, applies the profiling-overhead example and shows it
# accepted, shows that an invalid manifest is refused naming the field, and tears
# everything down. Set KUBECONFIG to use an existing cluster instead (the CRD is
# then applied to it first).
#
# The local control plane has no kubelet: the experiment is accepted and
# reconciled but no load runs. Later work grows this into a real single-node run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
STATE="${ROOT}/.state/quickstart"
mkdir -p "${STATE}"
EXAMPLE="${EXAMPLE:-examples/profiling-overhead.yaml}"

hack/tools.sh kube
KUBECTL="${ROOT}/bin/kubectl"
go build -o "${STATE}/manager" ./cmd/manager
go build -o "${STATE}/controlplane" ./hack/controlplane

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "${pid}" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "${pid}" 2>/dev/null || true; done
}
trap cleanup EXIT

if [[ -z "${KUBECONFIG:-}" ]]; then
  export KUBECONFIG="${STATE}/kubeconfig"
  rm -f "${KUBECONFIG}"
  echo "==> starting a local control plane (logs: ${STATE}/controlplane.log)"
  "${STATE}/controlplane" --write-kubeconfig "${KUBECONFIG}" >"${STATE}/controlplane.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    [[ -s "${KUBECONFIG}" ]] && break
    kill -0 "${pids[0]}" 2>/dev/null || { cat "${STATE}/controlplane.log"; exit 1; }
    sleep 0.2
  done
  [[ -s "${KUBECONFIG}" ]] || { echo "control plane did not start; see ${STATE}/controlplane.log" >&2; exit 1; }
else
  echo "==> using the cluster of KUBECONFIG=${KUBECONFIG}; installing the CRD"
  "${KUBECTL}" apply --server-side -f config/crd/bases/
fi
"${KUBECTL}" wait --for condition=Established --timeout=60s crd/perfexperiments.perfexp.dev

echo "==> starting the operator (logs: ${STATE}/manager.log)"
"${STATE}/manager" --metrics-bind-address=0 --health-probe-bind-address=127.0.0.1:0 >"${STATE}/manager.log" 2>&1 &
pids+=($!)

NS="$(sed -n 's/^  namespace: *//p' "${EXAMPLE}" | head -1)"
NS="${NS:-default}"
"${KUBECTL}" create namespace "${NS}" --dry-run=client -o yaml | "${KUBECTL}" apply -f - >/dev/null

echo "==> kubectl apply -f ${EXAMPLE}"
"${KUBECTL}" apply -f "${EXAMPLE}"
echo
echo "==> kubectl get perfexperiments -n ${NS}"
"${KUBECTL}" get perfexperiments -n "${NS}"
echo
echo "==> the operator's preflight: it stalls, with the reason, rather than touch a missing target"
"${KUBECTL}" wait -n "${NS}" --for=condition=Stalled --timeout=60s perfexperiment --all >/dev/null
"${KUBECTL}" get perfexperiments -n "${NS}" -o jsonpath='{range .items[*]}{.metadata.name}: phase={.status.phase}{range .status.conditions[?(@.type=="Stalled")]} Stalled={.status} reason={.reason} message="{.message}"{end}{"\n"}{end}'
echo
echo "==> the plan as stored (defaults filled in by the apiserver)"
"${KUBECTL}" get perfexperiments -n "${NS}" -o jsonpath='{range .items[*]}{.metadata.name}: stages={.spec.stages[*].qps} windows={.spec.windows} toggle={.spec.toggle}{"\n"}{end}'
echo
echo "==> an invalid manifest is refused at apply, naming the field"
if sed -e 's/- {qps: 500}/- {qps: 0}/' -e 's/name: profiling-overhead$/name: invalid-example/' "${EXAMPLE}" \
    | "${KUBECTL}" apply -f - 2>"${STATE}/refused.txt"; then
  echo "expected the invalid manifest to be refused" >&2
  exit 1
fi
cat "${STATE}/refused.txt"
echo
echo "==> kubectl explain perfexperiment.spec.toggle"
"${KUBECTL}" explain perfexperiment.spec.toggle >"${STATE}/explain.txt"
head -20 "${STATE}/explain.txt"
echo
echo "quickstart: OK: the example was accepted, the operator reconciled it and stalled with a clear reason, and an invalid manifest was refused."
echo "(This control plane has no nodes, so no target or load can run; see the README's Status section.)"
