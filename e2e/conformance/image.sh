#!/usr/bin/env bash
# Build registry.k8s.io/e2e-test-images/agnhost:<version> without a registry:
# the agnhost binary (e2e/conformance/tools) on a minimal Debian rootfs
# holding what Kubernetes' network specs exec in it: /bin/sh, bash, curl, wget,
# nc (OpenBSD flavour), seq, date, sleep (coreutils), ss (iproute2), nslookup
# and dig (upstream's bind-tools; Debian's bind9-dnsutils), iperf. Upstream's
# image is Alpine-based (test/images/agnhost/Dockerfile), so its wget is
# busybox's: one try, -T bounds it. GNU wget tries 20 times with back-off
# and turns every failed check of a spec into minutes, so wget here is
# busybox's too (its nc is not: the specs use OpenBSD's flags). Not bookworm's
# busybox: its wget (1.35) dies of SIGSEGV whenever -T is given, which every
# verifyServeHostnameServiceUp does; trixie's static busybox-static (1.37),
# pinned by file and SHA256 from the same mirror, is the one binary taken from
# there, and the build checks that its wget -T fails as a refused connection
# should (exit 1). The rest of its
# layout is copied: /agnhost as ENTRYPOINT with CMD pause, /agnhost-2,
# /uploads, porter's localhost.crt/key, user 1000 in group 50000.
#
# Called by `make peer-image` (e2e/conformance/conformance.mk). Environment:
# AGNHOST (binary), AGNHOST_VERSION, AGNHOST_SRC (test/images/agnhost in the
# module cache), IMAGE, WORK, DEBIAN_MIRROR. Caches: $WORK/rootfs
# (debootstrap, keyed by suite + packages) and a label on $IMAGE holding the
# hash of every input.
set -euo pipefail
: "${AGNHOST:?}" "${AGNHOST_VERSION:?}" "${AGNHOST_SRC:?}" "${IMAGE:?}" "${WORK:?}" "${DEBIAN_MIRROR:?}"
DEBIAN_SUITE=bookworm
PACKAGES=curl,netcat-openbsd,iproute2,ca-certificates,bind9-dnsutils,iperf
# A pin the mirror may drop once trixie moves on: then take the Filename and
# SHA256 of busybox-static from dists/trixie/main/binary-amd64/Packages.xz.
BUSYBOX_DEB=pool/main/b/busybox/busybox-static_1.37.0-6+b9_amd64.deb
BUSYBOX_SHA256=598a3fd92bdafc34cd81196b2952ad36e910e47a4ecf162f8ce5e8e262598e53
ROOTFS_IMAGE=svclb/agnhost-rootfs:$DEBIAN_SUITE

T0=$(date +%s)
step() { printf '[peer-image %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { echo "peer-image: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap)"
docker info >/dev/null 2>&1 || die "no Docker engine"
command -v debootstrap >/dev/null || die "debootstrap missing (apt-get install debootstrap)"
for t in curl dpkg-deb; do command -v "$t" >/dev/null || die "$t missing"; done
test -x "$AGNHOST" || die "$AGNHOST missing (make peer-tools)"
test -f "$AGNHOST_SRC/porter/localhost.crt" || die "agnhost sources not found in $AGNHOST_SRC"
# The e2e framework asks for the tag test/images/agnhost/VERSION names.
[ "$(cat "$AGNHOST_SRC/VERSION")" = "$AGNHOST_VERSION" ] || die "agnhost is $(cat "$AGNHOST_SRC/VERSION") at this Kubernetes version, not $AGNHOST_VERSION: set PEER_AGNHOST_VERSION"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

key="$DEBIAN_SUITE $PACKAGES wget=$BUSYBOX_DEB@$BUSYBOX_SHA256"
if [ ! -x "$WORK/rootfs/bin/sh" ] || [ "$(cat "$WORK/rootfs.key" 2>/dev/null)" != "$key" ]; then
  step "debootstrap $DEBIAN_SUITE ($PACKAGES) from $DEBIAN_MIRROR (log: $WORK/debootstrap.log)"
  rm -rf "$WORK/rootfs" "$WORK/rootfs.tmp" "$WORK/rootfs.key"
  debootstrap --variant=minbase --include="$PACKAGES" "$DEBIAN_SUITE" "$WORK/rootfs.tmp" "$DEBIAN_MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || die "debootstrap failed, see $WORK/debootstrap.log"
  rm -rf "$WORK/rootfs.tmp/var/cache/apt/archives/"*.deb "$WORK/rootfs.tmp/var/lib/apt/lists/"*
  step "busybox-static from $DEBIAN_MIRROR/$BUSYBOX_DEB"
  curl -fsS --retry 3 -o "$WORK/busybox.deb" "$DEBIAN_MIRROR/$BUSYBOX_DEB" || die "cannot fetch $DEBIAN_MIRROR/$BUSYBOX_DEB (the pin above may be gone from the mirror)"
  echo "$BUSYBOX_SHA256  $WORK/busybox.deb" | sha256sum -c --quiet - || die "$BUSYBOX_DEB: SHA256 is not $BUSYBOX_SHA256"
  rm -rf "$WORK/busybox" && dpkg-deb -x "$WORK/busybox.deb" "$WORK/busybox"
  install -m 0755 "$WORK/busybox/usr/bin/busybox" "$WORK/rootfs.tmp/bin/busybox"
  rm -rf "$WORK/busybox" "$WORK/busybox.deb"
  ln -sf /bin/busybox "$WORK/rootfs.tmp/usr/bin/wget"
  for t in sh bash curl wget nc seq date sleep ss nslookup dig iperf; do
    chroot "$WORK/rootfs.tmp" sh -c "command -v $t" >/dev/null || die "rootfs lacks $t"
  done
  # OpenBSD's nc (-z, -w, -q as the specs use them), not traditional's.
  chroot "$WORK/rootfs.tmp" readlink -f /bin/nc | grep -q openbsd || die "nc is not netcat-openbsd"
  chroot "$WORK/rootfs.tmp" readlink -f /usr/bin/wget | grep -q busybox || die "wget is not busybox's"
  # A refused connection, bounded by -T: exit 1, one try (bookworm's 1.35: 139, SIGSEGV).
  rc=0
  chroot "$WORK/rootfs.tmp" wget -q -O - -T 1 http://127.0.0.1:1 >/dev/null 2>&1 || rc=$?
  [ "$rc" = 1 ] || die "wget -T 1 to a closed port exited $rc, want 1"
  mv "$WORK/rootfs.tmp" "$WORK/rootfs"
  echo "$key" >"$WORK/rootfs.key"
fi

hash=$({
  echo "$IMAGE"
  cat "$WORK/rootfs.key"
  sha256sum "$0" "$AGNHOST" "$AGNHOST_SRC"/porter/localhost.* | cut -d' ' -f1
} | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "svclb.inputs" }}' "$IMAGE" 2>/dev/null)" = "$hash" ]; then
  step "$IMAGE is up to date (inputs $hash)"
  exit 0
fi

rkey=$(sha256sum <"$WORK/rootfs.key" | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "svclb.rootfs" }}' "$ROOTFS_IMAGE" 2>/dev/null)" != "$rkey" ]; then
  step "docker import $ROOTFS_IMAGE"
  tar -C "$WORK/rootfs" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -c . |
    docker import -c "LABEL svclb.rootfs=$rkey" - "$ROOTFS_IMAGE" >/dev/null
fi

ctx=$WORK/ctx
rm -rf "$ctx" && mkdir -p "$ctx"
cp "$AGNHOST" "$ctx/agnhost"
cp "$AGNHOST_SRC"/porter/localhost.crt "$AGNHOST_SRC"/porter/localhost.key "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $ROOTFS_IMAGE
COPY agnhost localhost.crt localhost.key /
RUN ln -s agnhost /agnhost-2 && mkdir /uploads \\
 && groupadd -g 50000 group-defined-in-image \\
 && useradd -u 1000 -M -N -G group-defined-in-image user-defined-in-image
EXPOSE 80 8080 8081 9376 5000
LABEL svclb.inputs=$hash
ENTRYPOINT ["/agnhost"]
CMD ["pause"]
DOCKERFILE
step "docker build $IMAGE"
out=$(docker build -q -t "$IMAGE" "$ctx" 2>&1) || { echo "$out" >&2; die "docker build $IMAGE failed"; }
rm -rf "$ctx"
step "done: $IMAGE (inputs $hash)"
