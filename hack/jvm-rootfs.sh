#!/usr/bin/env bash
# hack/jvm-rootfs.sh builds bin/jvm-rootfs/rootfs.tar: a trimmed Debian bookworm
# root filesystem with a headless OpenJDK 17 (java and jcmd), the base layer of
# the JVM sample app's image (hack/image.sh jvm). No Docker and no registry:
# debootstrap from Debian's mirror, apt inside the chroot, then a tar with
# sorted names, epoch times and root owners.
#
# The result is cached: it is rebuilt only when this script changes (its hash is
# stamped next to the tar). The same package versions give the same files but
# one: /etc/ssl/certs/java/cacerts, a Java keystore whose entries carry the time
# ca-certificates-java imported them. The versions are listed in
# /usr/share/perfexp/packages.txt in the image.
#
#   MIRROR=http://deb.debian.org/debian (default)
#
# Needs root (debootstrap, chroot, mounting /proc in the chroot); installs
# debootstrap with apt-get when it is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/jvm-rootfs"
TAR="${OUT}/rootfs.tar"
STAMP="${TAR}.stamp"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
JDK=openjdk-17-jdk-headless

log() { echo "jvm-rootfs: $*" >&2; }

want="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [[ -f "${TAR}" && -f "${STAMP}" && "$(cat "${STAMP}")" == "${want}" ]]; then
  log "up to date: ${TAR#"${ROOT}/"}"
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  log "needs root (debootstrap and chroot)"; exit 1
fi
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

start="${SECONDS}"
mkdir -p "${OUT}"
DIR="$(mktemp -d "${OUT}/.jvm-rootfs-XXXXXX")"
cleanup() {
  mountpoint -q "${DIR}/proc" && umount "${DIR}/proc"
  rm -rf "${DIR}"
}
trap cleanup EXIT

log "debootstrap ${SUITE} (minbase) from ${MIRROR}"
debootstrap --variant=minbase "${SUITE}" "${DIR}" "${MIRROR}" >"${DIR}.log" 2>&1 ||
  { tail -20 "${DIR}.log" >&2; rm -f "${DIR}.log"; exit 1; }
rm -f "${DIR}.log"

# The JDK's post-install scripts need /proc. No recommends: no X11, no fonts.
mount -t proc proc "${DIR}/proc"
log "installing ${JDK}"
chroot "${DIR}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${JDK}" >/dev/null
chroot "${DIR}" dpkg-query -W -f '${Package} ${Version}\n' >"${DIR}/packages.txt"
umount "${DIR}/proc"
mkdir -p "${DIR}/usr/share/perfexp"
mv "${DIR}/packages.txt" "${DIR}/usr/share/perfexp/packages.txt"

# Trim what a running JVM never reads: documentation, manuals, locales, apt's
# caches and lists, logs with build-time timestamps, the JDK's jmods (jlink
# input), sources, javac's symbol file and the class-data archive for heaps
# over 32 GiB. ld.so.cache and the dpkg database stay: the image is a
# normal Debian system that apt could still extend.
jdk="$(echo "${DIR}"/usr/lib/jvm/java-17-openjdk-*)"
rm -rf "${DIR}"/usr/share/{doc,man,info,locale,lintian,linda} \
  "${DIR}"/var/cache/apt/* "${DIR}"/var/lib/apt/lists/* "${DIR}"/var/cache/debconf/*-old \
  "${DIR}"/var/log/* "${DIR}"/tmp/* "${DIR}"/var/tmp/* \
  "${jdk}/jmods" "${jdk}/lib/src.zip" "${jdk}/lib/ct.sym" "${jdk}/lib/server/classes_nocoops.jsa" \
  "${DIR}/etc/machine-id" "${DIR}/var/lib/dbus/machine-id"
# Files whose content is the build's time or randomness.
rm -f "${DIR}"/var/lib/dpkg/*-old "${DIR}"/var/cache/ldconfig/aux-cache
: >"${DIR}/etc/machine-id"
# Device nodes are the runtime's business (it mounts /dev); an image layer with
# them does not unpack without privileges.
rm -rf "${DIR:?}"/dev/*

tmp="$(mktemp "${OUT}/.jvm-rootfs-XXXXXX.tar")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "${DIR}" -cf "${tmp}" .
chmod 0644 "${tmp}"
mv "${tmp}" "${TAR}"
echo "${want}" >"${STAMP}"
log "built ${TAR#"${ROOT}/"} ($(du -h "${TAR}" | cut -f1), sha256 $(sha256sum "${TAR}" | cut -c1-12)) in $((SECONDS - start))s;" \
  "$(grep -c . "${DIR}/usr/share/perfexp/packages.txt") packages, $(grep "^${JDK} " "${DIR}/usr/share/perfexp/packages.txt")"
