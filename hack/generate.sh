#!/usr/bin/env bash
# hack/generate.sh regenerates deepcopy code, the CRD and the RBAC role from the
# Go types and markers. `make verify-generated` fails when the committed files differ.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
hack/tools.sh controller-gen
bin/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
# Floats are allowed in status only (results: latencies, overheads, intervals).
# Each generator reads only the packages that carry its markers.
bin/controller-gen crd:allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=config/crd/bases
bin/controller-gen rbac:roleName=perf-operator-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
