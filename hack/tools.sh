#!/usr/bin/env bash
# hack/tools.sh builds the project's tools from pinned Go modules into bin/.
#
#   hack/tools.sh kube            kube-apiserver, etcd, kubectl, kube-controller-manager,
#                                 kube-scheduler, kubelet, kube-proxy (one multi-call binary)
#   hack/tools.sh controller-gen  CRD, RBAC and deepcopy generator
#   hack/tools.sh k6              the k6 load generator, for internal/k6's real-k6 tests
#   hack/tools.sh image           ociimage, which writes image archives (hack/image.sh)
#   hack/tools.sh helm            the Helm CLI, for the chart's tests and installs
#   hack/tools.sh metrics-server  metrics-server (kubectl top) for hack/cluster.sh
#   hack/tools.sh coredns         cluster DNS with only the plugins hack/cluster.sh uses
#   hack/tools.sh cluster         kube, metrics-server and coredns: what hack/cluster.sh runs
#   hack/tools.sh monitoring      prometheus-operator, prometheus-config-reloader and
#                                 prometheus, for the local cluster's opt-in monitoring
#                                 stack (hack/local.sh with MONITORING=1); not in `all`
#   hack/tools.sh all             every tool above but monitoring
#
# Nothing is downloaded but Go modules: this project is built where no binary
# release can be fetched. Each tool is rebuilt only when its inputs change (the
# module's go.mod, go.sum and sources, the Go version and the link flags), so a warm
# call returns in well under a second; a cold kube build takes several minutes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
mkdir -p "${BIN}"

KUBE_VERSION="v1.37.0"

# stamp prints a digest of everything that decides a tool's bytes.
stamp() {
  local dir="$1"; shift
  { go version; echo "$*"; cd "${dir}" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1
}

# build NAME MODULE_DIR PACKAGE OUTPUT [LDFLAGS [TAGS]]: go build unless the stamp matches.
build() {
  local name="$1" dir="$2" pkg="$3" out="$4" ldflags="${5:-}" tags="${6:-}"
  local want; want="$(stamp "${dir}" "${pkg}" "${ldflags}" "${tags}")"
  local stampfile="${BIN}/.${name}.stamp"
  if [[ -x "${out}" && -f "${stampfile}" && "$(cat "${stampfile}")" == "${want}" ]]; then
    return 0
  fi
  echo "tools: building ${name} (cold builds take minutes; cached in bin/ afterwards)" >&2
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -tags "${tags}" -ldflags "${ldflags}" -o "${out}.tmp" "${pkg}")
  mv -f "${out}.tmp" "${out}"
  echo "${want}" > "${stampfile}"
  echo "tools: built ${name} in $((SECONDS - start))s" >&2
}

kube() {
  local major="${KUBE_VERSION#v}"; major="${major%%.*}"
  local minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
    ldflags+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=1970-01-01T00:00:00Z"
  done
  build kube "${ROOT}/hack/kube" . "${BIN}/kube" "${ldflags}"
  for c in kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kubelet kube-proxy; do
    ln -sfn kube "${BIN}/${c}"
  done
}

controller_gen() {
  build controller-gen "${ROOT}/hack/tools" sigs.k8s.io/controller-tools/cmd/controller-gen "${BIN}/controller-gen" "-s -w"
}

# k6 is built from the same version as the Jobs' default image (grafana/k6:1.8.1), the
# way its own Dockerfile builds it, so the real-k6 tests run the script the operator
# generates against the k6 that will run it in the cluster.
k6() {
  build k6 "${ROOT}/hack/k6" . "${BIN}/k6" "-s -w"
}

# ociimage writes container image archives without Docker or a registry.
image() {
  build ociimage "${ROOT}/hack/image" . "${BIN}/ociimage" "-s -w"
}

# helm is Helm's own CLI (helm.sh/helm/vN/cmd/helm, pinned by hack/helm/go.mod's tool
# directive), stamped with its module version the way Helm's Makefile does for a
# release, so `helm version` names what is pinned.
helm() {
  local dir="${ROOT}/hack/helm"
  local mod ver
  mod="$(sed -n 's|^tool \(helm\.sh/helm/v[0-9]*\)/cmd/helm$|\1|p' "${dir}/go.mod")"
  ver="$(cd "${dir}" && go list -m -f '{{.Version}}' "${mod}")"
  local ldflags="-s -w -X ${mod}/internal/version.version=${ver} -X ${mod}/internal/version.gitTreeState=clean"
  build helm "${dir}" "${mod}/cmd/helm" "${BIN}/helm" "${ldflags}"
}

# metrics-server pins its own Kubernetes libraries (one minor behind), so it is built
# from its own module, hack/metrics-server, where it is a `tool` of that module.
metrics_server() {
  build metrics-server "${ROOT}/hack/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server "${BIN}/metrics-server" "-s -w"
}

coredns() {
  build coredns "${ROOT}/hack/coredns" . "${BIN}/coredns" "-s -w"
}

# monitoring builds the local cluster's monitoring stack: prometheus-operator and its
# config reloader from hack/monitoring/go.mod, and the Prometheus its compatibility
# matrix defaults to from hack/prometheus/go.mod (a module of its own: the operator
# requires newer versions of some of Prometheus' dependencies than Prometheus builds
# with). Each is stamped with its module version as its release is, so `--version`
# and the build_info metrics name what is pinned. Prometheus keeps only Kubernetes
# service discovery (the only one prometheus-operator's configuration uses; upstream's
# remove_all_sd build tags), which leaves the cloud providers' SDKs out of its build.
#
# prometheus-operator's client module (.../pkg/client) is not served by the Go module
# proxy for the pinned version, so it is generated first, into hack/monitoring/client/
# (git-ignored but for its go.mod), from the served API module with Kubernetes' code
# generators and upstream's header and arguments (its `make k8s-client-gen`).
monitoring() {
  local dir="${ROOT}/hack/monitoring" pdir="${ROOT}/hack/prometheus"
  local op="github.com/prometheus-operator/prometheus-operator" prom="github.com/prometheus/prometheus"
  local opv promv
  opv="$(cd "${dir}" && go list -m -f '{{.Version}}' "${op}")"
  promv="$(cd "${pdir}" && go list -m -f '{{.Version}}' "${prom}")"
  monitoring_client "${dir}" "${op}"
  local v="github.com/prometheus/common/version"
  local stampflags="-X ${v}.Branch=HEAD -X ${v}.BuildUser=perf-operator -X ${v}.BuildDate=19700101-00:00:00"
  build prometheus-operator "${dir}" "${op}/cmd/operator" "${BIN}/prometheus-operator" \
    "-s -w -X ${v}.Version=${opv#v} ${stampflags}"
  build prometheus-config-reloader "${dir}" "${op}/cmd/prometheus-config-reloader" "${BIN}/prometheus-config-reloader" \
    "-s -w -X ${v}.Version=${opv#v} ${stampflags}"
  # Prometheus 3.x is released as module v0.3MM.P: v0.314.0 is v3.14.0.
  local pv="${promv#v0.}"; pv="3.$((10#${pv%%.*} - 300)).${pv#*.}"
  build prometheus "${pdir}" "${prom}/cmd/prometheus" "${BIN}/prometheus" \
    "-s -w -X ${v}.Version=${pv} ${stampflags}" "remove_all_sd,enable_kubernetes_sd"
}

# monitoring_client DIR MODULE generates DIR/client unless its stamp (the modules'
# go.mod and go.sum and the Go version) matches.
monitoring_client() {
  local dir="$1" op="$2"
  local want; want="$({ go version; cat "${dir}/go.mod" "${dir}/go.sum" "${dir}/client/go.mod"; } | sha256sum | cut -d' ' -f1)"
  local stampfile="${BIN}/.monitoring-client.stamp"
  if [[ -f "${stampfile}" && "$(cat "${stampfile}")" == "${want}" && -d "${dir}/client/versioned" ]]; then
    return 0
  fi
  echo "tools: generating prometheus-operator's client module" >&2
  local start=${SECONDS}
  local apis=("${op}/pkg/apis/monitoring/v1" "${op}/pkg/apis/monitoring/v1alpha1" "${op}/pkg/apis/monitoring/v1beta1")
  local c="${op}/pkg/client"
  (
    cd "${dir}"
    rm -rf client/versioned client/informers client/listers client/applyconfiguration
    local hdr; hdr="$(go list -m -f '{{.Dir}}' "${op}")/.header"
    local args=(--go-header-file "${hdr}")
    go tool applyconfiguration-gen "${args[@]}" --output-pkg "${c}/applyconfiguration" \
      --output-dir client/applyconfiguration "${apis[@]}"
    go tool client-gen "${args[@]}" --apply-configuration-package "${c}/applyconfiguration" \
      --input-base "${op}/pkg/apis" --clientset-name versioned --output-pkg "${c}" --output-dir client \
      --input monitoring/v1 --input monitoring/v1beta1 --input monitoring/v1alpha1
    go tool lister-gen "${args[@]}" --output-pkg "${c}/listers" --output-dir client/listers "${apis[@]}"
    go tool informer-gen "${args[@]}" --versioned-clientset-package "${c}/versioned" \
      --listers-package "${c}/listers" --output-pkg "${c}/informers" --output-dir client/informers "${apis[@]}"
  )
  echo "${want}" > "${stampfile}"
  echo "tools: generated it in $((SECONDS - start))s" >&2
}

case "${1:-all}" in
  kube) kube ;;
  controller-gen) controller_gen ;;
  k6) k6 ;;
  image) image ;;
  helm) helm ;;
  metrics-server) metrics_server ;;
  coredns) coredns ;;
  cluster) kube; metrics_server; coredns ;;
  monitoring) monitoring ;;
  all) controller_gen; image; k6; helm; kube; metrics_server; coredns ;;
  *) echo "usage: $0 kube|controller-gen|k6|image|helm|metrics-server|coredns|cluster|monitoring|all" >&2; exit 2 ;;
esac
