#!/usr/bin/env bash
# hack/generate.sh regenerates deepcopy code, the CRD and the RBAC role from the
# Go types and markers. `make verify-generated` fails when the committed files differ.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
hack/tools.sh controller-gen
bin/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
# Floats are allowed in status only (results: latencies, overheads, intervals).
bin/controller-gen crd:allowDangerousTypes=true rbac:roleName=perf-operator-manager \
  paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
