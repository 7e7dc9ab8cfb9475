#!/usr/bin/env bash
# Assemble a kind node image without any container registry.
#
# `kind build node-image` fetches etcd, CoreDNS, pause and kindnetd with
# `ctr content fetch`, so offline we assemble the same result by hand:
# a debootstrap'd Debian rootfs + kind's own images/base/files (from the kind
# module) + kubeadm/kubelet/kubectl + the control-plane images, built FROM
# scratch (or FROM the Debian rootfs where a shell or nft is needed) and
# pre-loaded into containerd's k8s.io namespace under their registry.k8s.io names.
#
# Called by `make node-image` (kindconfig/kindconfig.mk), which builds the
# binaries first. Inputs (environment): BIN_DIR WORK IMAGE KIND_BASE K8S_VERSION
# ETCD_TAG COREDNS_TAG PAUSE_TAGS FLANNEL_VERSION DEBIAN_MIRROR.
# Caches: $WORK/rootfs (debootstrap, ~80 s cold), docker's layer cache for the
# component images, and a label on $IMAGE holding the hash of every input: when
# it matches, nothing is rebuilt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${BIN_DIR:?}" "${WORK:?}" "${IMAGE:?}" "${KIND_BASE:?}" "${K8S_VERSION:?}" "${ETCD_TAG:?}"
: "${COREDNS_TAG:?}" "${PAUSE_TAGS:?}" "${FLANNEL_VERSION:?}"
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SUITE=bookworm
PACKAGES=systemd,systemd-sysv,dbus,iproute2,iptables,nftables,containerd,runc,conntrack,ca-certificates,procps,jq,kmod,ethtool,socat,ebtables,util-linux,mount,e2fsprogs,libseccomp2,pigz
ROOTFS_IMAGE=svclb/debian-rootfs:$DEBIAN_SUITE

T0=$(date +%s)
step() { printf '[node-image %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { echo "node-image: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
docker info >/dev/null 2>&1 || die "no Docker engine: start a Docker engine (README.md, \"What you need\")"
command -v debootstrap >/dev/null || die "debootstrap missing (apt-get install debootstrap)"
test -f "$KIND_BASE/usr/local/bin/entrypoint" || die "kind base files not found in $KIND_BASE"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

# ---- 1. Debian rootfs (cached; keyed by suite + package list) -------------
rootfs() {
  local key="$DEBIAN_SUITE $PACKAGES"
  if [ -x "$WORK/rootfs/sbin/init" ] && [ "$(cat "$WORK/rootfs.key" 2>/dev/null)" = "$key" ]; then
    return
  fi
  step "debootstrap $DEBIAN_SUITE from $DEBIAN_MIRROR (log: $WORK/debootstrap.log)"
  rm -rf "$WORK/rootfs" "$WORK/rootfs.tmp" "$WORK/rootfs.key"
  debootstrap --variant=minbase --include="$PACKAGES" "$DEBIAN_SUITE" "$WORK/rootfs.tmp" "$DEBIAN_MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || die "debootstrap failed, see $WORK/debootstrap.log"
  rm -rf "$WORK/rootfs.tmp/var/cache/apt/archives/"*.deb
  mv "$WORK/rootfs.tmp" "$WORK/rootfs"
  echo "$key" >"$WORK/rootfs.key"
}

tar_rootfs() { tar -C "$1" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -c .; }

# ---- 2. inputs hash: skip everything when the image already has it ---------
inputs_hash() {
  {
    echo "$IMAGE $K8S_VERSION $ETCD_TAG $COREDNS_TAG $PAUSE_TAGS $FLANNEL_VERSION"
    cat "$WORK/rootfs.key"
    sha256sum "$0" "$HERE"/files/* "$HERE"/Dockerfile.* | cut -d' ' -f1
    (cd "$BIN_DIR" && sha256sum kubeadm kubelet kubectl kube-apiserver kube-controller-manager \
      kube-scheduler kube-proxy etcd coredns pause flanneld cni/*)
    (cd "$KIND_BASE" && find . -type f | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -c1-16
}

# ---- 3. component images (docker layer cache makes warm builds cheap) ------
component_images() {
  # One small context per image (hard links, no copies): docker hashes and
  # ships only what that image needs, so unchanged images are cheap cache hits.
  local ctx=$WORK/ctx b
  rm -rf "$ctx" && mkdir -p "$ctx/rootdirs/tmp" "$ctx/rootdirs/etc"
  chmod 1777 "$ctx/rootdirs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$ctx/rootdirs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$ctx/rootdirs/etc/group"
  for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause flanneld; do
    mkdir -p "$ctx/$b" && cp -a "$ctx/rootdirs" "$ctx/$b/"
    ln -f "$BIN_DIR/$b" "$ctx/$b/$b" 2>/dev/null || cp "$BIN_DIR/$b" "$ctx/$b/$b"
  done
  local key
  key=$(sha256sum <"$WORK/rootfs.key" | cut -c1-16)
  if [ "$(docker image inspect -f '{{ index .Config.Labels "svclb.rootfs" }}' "$ROOTFS_IMAGE" 2>/dev/null)" != "$key" ]; then
    step "docker import $ROOTFS_IMAGE (base of kube-proxy and flannel: they need nft/iptables/sh)"
    tar_rootfs "$WORK/rootfs" | docker import -c "LABEL svclb.rootfs=$key" - "$ROOTFS_IMAGE" >/dev/null
  fi
  step "component images (registry.k8s.io names)"
  # Quiet unless it fails (the legacy builder prints a deprecation notice each time).
  build() { # build <binary> <dockerfile> <tag> [docker build args...]
    local bin=$1 df=$2 tag=$3 out
    shift 3
    out=$(docker build -q -f "$HERE/$df" -t "$tag" "$@" "$ctx/$bin" 2>&1) || { echo "$out" >&2; die "docker build $tag failed"; }
  }
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    build $b Dockerfile.bin "registry.k8s.io/$b:$K8S_VERSION" --build-arg BIN=$b
  done
  build etcd Dockerfile.bin "registry.k8s.io/etcd:$ETCD_TAG" --build-arg BIN=etcd
  build kube-proxy Dockerfile.debian "registry.k8s.io/kube-proxy:$K8S_VERSION" --build-arg BASE="$ROOTFS_IMAGE" --build-arg BIN=kube-proxy
  build flanneld Dockerfile.debian "svclb/flannel:$FLANNEL_VERSION" --build-arg BASE="$ROOTFS_IMAGE" --build-arg BIN=flanneld
  build coredns Dockerfile.coredns "registry.k8s.io/coredns/coredns:$COREDNS_TAG"
  local first="" t
  for t in $PAUSE_TAGS; do
    if [ -z "$first" ]; then first=$t; build pause Dockerfile.pause "registry.k8s.io/pause:$t"
    else docker tag "registry.k8s.io/pause:$first" "registry.k8s.io/pause:$t"; fi
  done
  rm -rf "$ctx"
  IMAGES="registry.k8s.io/kube-apiserver:$K8S_VERSION registry.k8s.io/kube-controller-manager:$K8S_VERSION"
  IMAGES+=" registry.k8s.io/kube-scheduler:$K8S_VERSION registry.k8s.io/kube-proxy:$K8S_VERSION"
  IMAGES+=" registry.k8s.io/etcd:$ETCD_TAG registry.k8s.io/coredns/coredns:$COREDNS_TAG svclb/flannel:$FLANNEL_VERSION"
  for t in $PAUSE_TAGS; do IMAGES+=" registry.k8s.io/pause:$t"; done
}

# ---- 4. node rootfs: Debian + kind's base files + Kubernetes -------------
node_rootfs() {
  step "node rootfs: debootstrap + kind base files + kubeadm/kubelet/kubectl + CNI plugins"
  local R=$WORK/node B=$KIND_BASE
  rm -rf "$R" && cp -a "$WORK/rootfs" "$R"
  install -m 0755 "$B"/usr/local/bin/* "$R/usr/local/bin/"
  mkdir -p "$R/kind/bin" && cp -r "$B"/kind/. "$R/kind/"
  chmod -R u+w "$R/kind" && chmod 0755 "$R/kind" "$R/kind/bin" "$R"/kind/bin/*
  install -m 0644 "$B/etc/crictl.yaml" "$R/etc/"
  mkdir -p "$R/etc/containerd" && install -m 0644 "$B/etc/containerd/config.toml" "$R/etc/containerd/"
  install -m 0644 "$B/etc/default/kubelet" "$R/etc/default/"
  install -m 0644 "$B"/etc/sysctl.d/* "$R/etc/sysctl.d/"
  install -m 0644 "$B"/etc/systemd/system/*.service "$B"/etc/systemd/system/*.slice "$R/etc/systemd/system/"
  mkdir -p "$R/etc/systemd/system/kubelet.service.d"
  install -m 0644 "$B"/etc/systemd/system/kubelet.service.d/* "$HERE/files/12-cgroupv1.conf" "$R/etc/systemd/system/kubelet.service.d/"
  # The same trimming kind's base image does: no units that cannot work in a container.
  find "$R/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$R"/lib/systemd/system/multi-user.target.wants/* "$R"/etc/systemd/system/*.wants/* \
    "$R"/lib/systemd/system/local-fs.target.wants/* "$R"/lib/systemd/system/sockets.target.wants/*udev* \
    "$R"/lib/systemd/system/sockets.target.wants/*initctl* "$R"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$R/etc/systemd/journald.conf"
  chroot "$R" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$R" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  # kind's units expect containerd in /usr/local; Debian's (1.6.20) lives in /usr.
  ln -sf /usr/bin/containerd "$R/usr/local/bin/containerd"
  ln -sf /usr/bin/ctr "$R/usr/local/bin/ctr"
  ln -sf /usr/bin/containerd-shim-runc-v2 "$R/usr/local/bin/containerd-shim-runc-v2"
  ln -sf /usr/sbin/runc "$R/usr/local/sbin/runc"
  chroot "$R" sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json'
  # No CAP_SYS_RESOURCE on these hosts: pod sandboxes (oom_score_adj -998) fail
  # unless containerd clamps oom_score_adj to what it may set.
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$R/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$R/etc/containerd/config.toml" || die "containerd config: restrict_oom_score_adj not set"
  mkdir -p "$R/etc/kubernetes/manifests" "$R/opt/cni/bin" "$R/etc/cni/net.d" "$R/kind/manifests"
  install -m 0644 "$HERE/files/default-storage.yaml" "$HERE/files/default-cni.yaml" "$R/kind/manifests/"
  printf '%s' "$K8S_VERSION" >"$R/kind/version"
  install -m 0755 "$BIN_DIR/kubeadm" "$BIN_DIR/kubelet" "$BIN_DIR/kubectl" "$R/usr/bin/"
  install -m 0755 "$BIN_DIR"/cni/* "$R/opt/cni/bin/"
}

# ---- 5. pre-load the images with a throwaway containerd on the host --------
# The store is cached in $WORK/containerd, keyed by the images' IDs.
preload() {
  local key C=$WORK/ctrd store=$WORK/containerd
  # shellcheck disable=SC2086
  key=$(docker image inspect -f '{{.Id}}' $IMAGES | sha256sum | cut -c1-16) || die "component images missing"
  if [ -d "$store" ] && [ "$(cat "$WORK/containerd.key" 2>/dev/null)" = "$key" ]; then
    step "containerd image store is up to date ($key)"
  else
    step "pre-load images into the node's containerd (k8s.io namespace)"
    rm -rf "$C" "$store" "$WORK/containerd.key" && mkdir -p "$C" "$store"
    # shellcheck disable=SC2086
    docker save $IMAGES -o "$C/images.tar"
    printf 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' >"$C/config.toml"
    containerd -c "$C/config.toml" --root "$store" --state "$C/state" --address "$C/c.sock" >"$C/log" 2>&1 &
    local pid=$!
    trap 'kill '"$pid"' 2>/dev/null || true' EXIT
    for _ in $(seq 1 50); do [ -S "$C/c.sock" ] && break; sleep 0.2; done
    ctr --address "$C/c.sock" -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
      --all-platforms --no-unpack --digests "$C/images.tar" >/dev/null
    local n
    n=$(ctr --address "$C/c.sock" -n k8s.io images ls -q | grep -vc '@sha256')
    kill "$pid"; wait "$pid" 2>/dev/null || true
    trap - EXIT
    rm -rf "$C"
    [ "$n" -ge 8 ] || die "expected at least 8 images in the node's containerd, found $n"
    echo "$key" >"$WORK/containerd.key"
  fi
  rm -rf "$WORK/node/var/lib/containerd" && mkdir -p "$WORK/node/var/lib"
  cp -a "$store" "$WORK/node/var/lib/containerd"
}

rootfs
HASH=$(inputs_hash)
if [ "$(docker image inspect -f '{{ index .Config.Labels "svclb.inputs" }}' "$IMAGE" 2>/dev/null)" = "$HASH" ]; then
  step "$IMAGE is up to date (inputs $HASH)"
  exit 0
fi
component_images
node_rootfs
preload
step "docker import $IMAGE"
# docker import cannot set STOPSIGNAL: import a flat rootfs image, then add it.
tar_rootfs "$WORK/node" | docker import -c 'ENV container=docker' \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$IMAGE-rootfs" >/dev/null
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\nLABEL svclb.inputs=%s\n' "$IMAGE-rootfs" "$HASH" |
  docker build -q -t "$IMAGE" - >/dev/null 2>&1 || die "docker build $IMAGE failed"
rm -rf "$WORK/node"
step "done: $IMAGE (inputs $HASH)"
