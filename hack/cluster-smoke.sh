#!/usr/bin/env bash
# hack/cluster-smoke.sh checks a cluster started by hack/cluster.sh up:
#
#   1. a Deployment of the pause image runs (images are imported, never pulled);
#   2. if bin/images/k6.tar and bin/images/toy.tar exist: a k6 Job loads the toy server
#      through its Service name (cluster DNS) and ClusterIP (kube-proxy), with no
#      failed request;
#   3. confinement: a k6 Job cannot reach the machine's default gateway nor resolve a
#      name outside the cluster, and the PERFEXP-CONFINE drop counter grows;
#   4. kubectl top pods works (metrics-server through the aggregator).
#
# The namespace perfexp-smoke is deleted at the end unless KEEP=1.
# SERVER_IMAGE / SERVER_PORT / SERVER_PATH choose the server k6 loads.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KUBECONFIG="${KUBECONFIG:-${ROOT}/.state/cluster/admin.kubeconfig}"
KUBECTL="${ROOT}/bin/kubectl"
NS=perfexp-smoke
SERVER_IMAGE="${SERVER_IMAGE:-perfexp.dev/toy:dev}"
SERVER_PORT="${SERVER_PORT:-8080}"
SERVER_PATH="${SERVER_PATH:-/}"
K6_IMAGE="${K6_IMAGE:-grafana/k6:1.8.1}"

kubectl() { "${KUBECTL}" "$@"; }
step() { echo; echo "==> $*"; }
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

cleanup() { [[ "${KEEP:-0}" == 1 ]] || kubectl delete namespace "${NS}" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

# deployment NAME IMAGE [PORT]: a one-replica Deployment of a locally imported image.
deployment() {
  local name="$1" image="$2" port="${3:-}"
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: ${NS}}
spec:
  replicas: 1
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: ${name}
          image: ${image}
          imagePullPolicy: Never
          resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {cpu: 500m, memory: 64Mi}}
$( [[ -n "${port}" ]] && echo "          ports: [{containerPort: ${port}}]" )
EOF
}

# k6_job NAME SCRIPT_KEY: a Job running one script of the smoke-scripts ConfigMap.
k6_job() {
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: ${NS}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: k6
          image: ${K6_IMAGE}
          imagePullPolicy: Never
          args: [run, --no-color, --no-usage-report, /scripts/$2]
          env:
            - {name: TARGET, value: "http://server.${NS}.svc:${SERVER_PORT}${SERVER_PATH}"}
            - {name: OUTSIDE, value: "http://${GATEWAY}:80/"}
          volumeMounts: [{name: scripts, mountPath: /scripts}]
      volumes: [{name: scripts, configMap: {name: smoke-scripts}}]
EOF
}

# run_job NAME SCRIPT_KEY: run a k6 Job to completion and print the end of its output.
run_job() {
  k6_job "$1" "$2" | kubectl apply -f - >/dev/null
  if ! kubectl wait -n "${NS}" --for=condition=Complete --timeout=180s "job/$1" >/dev/null; then
    kubectl logs -n "${NS}" "job/$1" --tail=40 || true
    fail "job $1 did not complete"
  fi
  kubectl logs -n "${NS}" "job/$1" | grep -E 'checks|http_reqs|http_req_failed|http_req_duration|✓|✗' || true
}

dropped() { iptables -w -L PERFEXP-CONFINE -v -n -x | awk 'NR > 2 {s += $1} END {print s + 0}'; }

kubectl create namespace "${NS}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

step "a Deployment of the pause image"
deployment pause perfexp.dev/pause:3.10 | kubectl apply -f - >/dev/null
kubectl rollout status -n "${NS}" deployment/pause --timeout=90s
kubectl get pods -n "${NS}" -o wide

if [[ -f "${ROOT}/bin/images/k6.tar" && -f "${ROOT}/bin/images/toy.tar" ]]; then
  GATEWAY="$(ip route show default | awk '{print $3; exit}')"
  step "a server behind a Service, and k6 scripts"
  deployment server "${SERVER_IMAGE}" "${SERVER_PORT}" | kubectl apply -f - >/dev/null
  kubectl expose -n "${NS}" deployment/server --port "${SERVER_PORT}" --dry-run=client -o yaml \
    | kubectl apply -f - >/dev/null
  kubectl create configmap -n "${NS}" smoke-scripts --dry-run=client -o yaml \
    --from-literal=load.js="$(cat <<'EOF'
import http from 'k6/http';
import { check } from 'k6';
export const options = {
  scenarios: { load: { executor: 'constant-arrival-rate', rate: 500, timeUnit: '1s',
    duration: '10s', preAllocatedVUs: 20 } },
  thresholds: { http_req_failed: ['rate==0'], checks: ['rate==1'] },
};
export default function () {
  check(http.get(__ENV.TARGET), { 'status 200': (r) => r.status === 200 });
}
EOF
)" --from-literal=escape.js="$(cat <<'EOF'
import http from 'k6/http';
import { check } from 'k6';
export const options = { iterations: 1, vus: 1, thresholds: { checks: ['rate==1'] } };
export default function () {
  // Status 0 is k6's "no response": the connection or the lookup failed.
  check(http.get(__ENV.OUTSIDE, { timeout: '3s' }), { 'the gateway is unreachable': (r) => r.status === 0 });
  check(http.get('http://example.com/', { timeout: '3s' }), { 'outside names do not resolve': (r) => r.status === 0 });
}
EOF
)" | kubectl apply -f - >/dev/null
  kubectl rollout status -n "${NS}" deployment/server --timeout=90s
  kubectl get service -n "${NS}" server

  step "k6 loads the server through http://server.${NS}.svc:${SERVER_PORT}${SERVER_PATH} (500 req/s, 10 s)"
  run_job load load.js

  step "confinement: from a pod, the gateway ${GATEWAY}:80 and outside names are unreachable"
  before="$(dropped)"
  run_job escape escape.js
  after="$(dropped)"
  echo "PERFEXP-CONFINE dropped packets: ${before} before, ${after} after"
  ((after > before)) || fail "the confinement chain dropped nothing"
  iptables -w -L PERFEXP-CONFINE -v -n
else
  echo "(no bin/images/k6.tar or toy.tar: skipping the k6 and confinement checks)"
fi

step "kubectl top pods -A (metrics-server; the first scrape takes up to a minute)"
for _ in $(seq 1 40); do
  if kubectl top pods -A 2>/dev/null | grep -q "${NS}"; then break; fi
  sleep 3
done
kubectl top pods -A || fail "kubectl top pods failed"
echo
echo "smoke: OK"
