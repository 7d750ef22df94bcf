#!/usr/bin/env bash
# hack/image.sh builds container image archives of the project's static binaries
# into bin/images/, for `ctr -n k8s.io images import` on a local cluster (pods use
# imagePullPolicy: Never). No Docker and no registry: bin/ociimage writes them.
#
#   hack/image.sh toy       bin/images/toy.tar      perfexp.dev/toy:dev (examples/apps/toy)
#   hack/image.sh manager   bin/images/manager.tar  perfexp.dev/perf-operator:<appVersion> (cmd/manager;
#                           the chart's appVersion, the tag its image.tag defaults to)
#   hack/image.sh k6        bin/images/k6.tar       grafana/k6:1.8.1 (the Jobs' default image)
#   hack/image.sh pause     bin/images/pause.tar    perfexp.dev/pause:3.10 (sandbox image)
#   hack/image.sh jvm       bin/images/jvm.tar      perfexp.dev/jvmapp:dev (examples/apps/jvm on
#                           a Debian root with OpenJDK 17, hack/jvm-rootfs.sh; needs root;
#                           installs debootstrap and Maven when missing)
#   hack/image.sh monitoring  bin/images/prometheus-operator.tar, prometheus-config-reloader.tar
#                           and prometheus.tar: perfexp.dev/prometheus-operator:<version>,
#                           perfexp.dev/prometheus-config-reloader:<version> and
#                           perfexp.dev/prometheus:<version> (hack/monitoring's pins, built by
#                           hack/tools.sh monitoring), for the opt-in monitoring stack
#   hack/image.sh all       every image above but jvm (which needs Debian's mirror
#                           and Maven Central; make e2e-jvm and the quick start of a
#                           JVM example build it) and monitoring (hack/local.sh builds it
#                           with MONITORING=1)
#
# FORMAT=oci writes OCI layout archives (named by the io.containerd.image.name
# annotation) instead of docker-archives. The same sources give the same bytes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
OUT="${BIN}/images"
WORK="${OUT}/.rootfs"
FORMAT="${FORMAT:-docker}"
PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# gobuild DIR PACKAGE OUTPUT: a static, stripped, path-independent binary.
gobuild() {
  (cd "$1" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags '-s -w' -o "$3" "$2")
}

# image NAME REF ociimage-args...: writes bin/images/NAME.tar and says what it holds.
image() {
  local name="$1" ref="$2"; shift 2
  "${BIN}/ociimage" -format "${FORMAT}" -o "${OUT}/${name}.tar" -name "${ref}" "$@"
  echo "image: ${OUT#"${ROOT}/"}/${name}.tar ${ref} ($(du -h "${OUT}/${name}.tar" | cut -f1), sha256 $(sha256sum "${OUT}/${name}.tar" | cut -c1-12))" >&2
}

toy() {
  gobuild "${ROOT}" ./examples/apps/toy "${WORK}/toy"
  image toy perfexp.dev/toy:dev -entrypoint /toy -user 65532:65532 "${WORK}/toy=/toy"
}

manager() {
  gobuild "${ROOT}" ./cmd/manager "${WORK}/manager"
  local version
  version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${ROOT}/charts/perf-operator/Chart.yaml")"
  image manager "perfexp.dev/perf-operator:${version}" -entrypoint /manager -user 65532:65532 "${WORK}/manager=/manager"
}

# k6 runs as the official image's user (12345, which the operator's Jobs set too)
# and is found on PATH, because the Jobs' command is "k6 run ...".
k6() {
  "${ROOT}/hack/tools.sh" k6
  image k6 grafana/k6:1.8.1 -entrypoint /usr/bin/k6 -user 12345:12345 -env "${PATH_ENV}" "${BIN}/k6=/usr/bin/k6"
}

pause() {
  gobuild "${ROOT}/hack/image" ./pause "${WORK}/pause"
  image pause perfexp.dev/pause:3.10 -entrypoint /pause -user 65535:65535 "${WORK}/pause=/pause"
}

# jvm: the Java sample app's jar (Maven, from Maven Central) on the JVM root
# filesystem as its own layer. java is PID 1, so jcmd 1 reaches it through
# pods/exec (an exec toggle); uid 65532 as in the other images, and JFR and the
# attach socket need a writable /tmp (an emptyDir in the manifests).
jvm() {
  "${ROOT}/hack/jvm-rootfs.sh"
  if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    echo "image.sh: installing maven and a JDK to build examples/apps/jvm" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven openjdk-17-jdk-headless >/dev/null
  fi
  # Maven 3.8 prints colour resets even in batch mode; they are stripped.
  (cd "${ROOT}/examples/apps/jvm" && mvn -q -B package -DskipTests | sed 's/\x1b\[[0-9;]*m//g')
  cp "${ROOT}/examples/apps/jvm/target/jvmapp.jar" "${WORK}/jvmapp.jar"
  image jvm perfexp.dev/jvmapp:dev -layer "${BIN}/jvm-rootfs/rootfs.tar" \
    -entrypoint /usr/bin/java -arg -jar -arg /app/jvmapp.jar -user 65532:65532 -env "${PATH_ENV}" \
    "${WORK}/jvmapp.jar=/app/jvmapp.jar"
}

# monitoring: each binary of the monitoring stack in its own image, where its
# upstream image has it (prometheus-operator sets the config reloader's command to
# /bin/prometheus-config-reloader and runs Prometheus by the image's entrypoint), as
# upstream's user nobody. hack/monitoring.sh names the same references.
monitoring() {
  "${ROOT}/hack/tools.sh" monitoring
  local ref
  for ref in $("${ROOT}/hack/monitoring.sh" images); do
    local name="${ref#perfexp.dev/}"; name="${name%%:*}"
    local bin="${name}"; [[ "${name}" == prometheus-operator ]] && bin=operator
    cp "${BIN}/${name}" "${WORK}/${name}"
    image "${name}" "${ref}" -entrypoint "/bin/${bin}" -user 65534:65534 "${WORK}/${name}=/bin/${bin}"
  done
}

if [[ $# -eq 0 ]]; then
  sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
"${ROOT}/hack/tools.sh" image
mkdir -p "${OUT}" "${WORK}"
for target in "$@"; do
  case "${target}" in
    toy) toy ;;
    manager) manager ;;
    k6) k6 ;;
    pause) pause ;;
    jvm) jvm ;;
    monitoring) monitoring ;;
    all) toy; manager; pause; k6 ;;
    *) echo "image.sh: unknown image ${target}: want toy, manager, k6, pause, jvm, monitoring or all" >&2; exit 2 ;;
  esac
done
