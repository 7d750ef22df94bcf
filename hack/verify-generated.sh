#!/usr/bin/env bash
# hack/verify-generated.sh regenerates code and manifests and fails if that changed
# anything: the committed CRD, RBAC and deepcopy code must match the Go types, and
# the chart's and config/samples' copies (and the chart README's values table) must
# match their sources, and docs/api.md the CRD.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GENERATED=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml
  charts/perf-operator/crds charts/perf-operator/files charts/perf-operator/README.md config/samples docs/api.md)
snapshot() { find "${GENERATED[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; }
before="$(snapshot)"
hack/generate.sh
after="$(snapshot)"
if [[ "${before}" != "${after}" ]]; then
  echo "generated files were stale and have been regenerated; review and commit them:" >&2
  diff <(echo "${before}") <(echo "${after}") >&2 || true
  exit 1
fi
echo "generated files are up to date"
