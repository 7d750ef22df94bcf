#!/usr/bin/env bash
# hack/prometheus.sh makes a real Prometheus server and promtool available for
# internal/metrics' tests and prints their absolute paths, one per line:
#
#   /usr/bin/prometheus
#   /usr/bin/promtool
#
# It is idempotent: when both are already on PATH it only prints their paths.
# Otherwise it installs Debian's `prometheus` package (which ships promtool)
# with apt-get: as root directly, through `sudo -n` when that works without a
# password. Where neither is possible it falls back to `apt-get download` and
# unpacks the .deb's two binaries into bin/prometheus-deb/ (git-ignored bin/,
# no root, no service started). Nothing but Debian packages is fetched.
#
# Note for workstations with systemd: installing the package enables and starts
# the distribution's prometheus.service on :9090 (containers normally have a
# policy-rc.d that prevents it). The tests never use that service; they start
# their own server on a free 127.0.0.1 port with a throw-away TSDB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${ROOT}/bin/prometheus-deb/usr/bin"

print_paths() {
  command -v prometheus
  command -v promtool
}

have() { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; }

if have; then
  print_paths
  exit 0
fi

# A previous unprivileged run may have unpacked the binaries into bin/.
if [[ -x "${LOCAL}/prometheus" && -x "${LOCAL}/promtool" ]]; then
  PATH="${LOCAL}:${PATH}" print_paths
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    SUDO=(none)
  fi
fi

# candidate prints the version apt would install, empty when the index lacks it.
candidate() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}' | grep -v '(none)' || true; }

if [[ "${SUDO[*]}" != none ]]; then
  echo "prometheus.sh: installing Debian package prometheus (ships promtool)" >&2
  if [[ -z "$(candidate)" ]]; then
    "${SUDO[@]}" apt-get update -qq >&2
  fi
  if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends prometheus >&2; then
    # A stale package index gives 404s for superseded versions: refresh once.
    "${SUDO[@]}" apt-get update -qq >&2
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends prometheus >&2
  fi
  hash -r
  # Debian installs into /usr/bin; be explicit in case PATH lacks it.
  PATH="${PATH}:/usr/bin"
  if ! have; then
    echo "prometheus.sh: package prometheus installed but prometheus/promtool are not on PATH" >&2
    exit 1
  fi
  print_paths
  exit 0
fi

echo "prometheus.sh: not root and no password-less sudo; unpacking the Debian package into ${ROOT}/bin/prometheus-deb" >&2
if [[ -z "$(candidate)" ]]; then
  echo "prometheus.sh: apt has no candidate for package prometheus; run \`sudo apt-get update\` (or install it: \`sudo apt-get install prometheus\`)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
(cd "${tmp}" && apt-get download prometheus >&2)
rm -rf "${ROOT}/bin/prometheus-deb.tmp"
mkdir -p "${ROOT}/bin/prometheus-deb.tmp"
dpkg-deb -x "${tmp}"/prometheus_*.deb "${ROOT}/bin/prometheus-deb.tmp"
rm -rf "${ROOT}/bin/prometheus-deb"
mv "${ROOT}/bin/prometheus-deb.tmp" "${ROOT}/bin/prometheus-deb"
PATH="${LOCAL}:${PATH}" print_paths
