#!/usr/bin/env bash
# make-test-image.sh - builds the test image: an OCI image layout tar holding
# Debian's busybox-static, for `gpusched image import` and the runc runtime's
# tests (no registry is reachable from a test node, and no binary is committed).
#
# Usage: scripts/make-test-image.sh OUT.tar [REF]
#   REF defaults to docker.io/library/busybox:latest (so pods may say "busybox").
# The layout has one manifest, one config (Cmd ["sh"], a PATH in Env) and one
# gzip layer: /bin/busybox, a symlink to it for each applet in APPLETS, and
# /tmp, /etc/passwd, /etc/group. Owners are 0:0 and times fixed, so the same
# busybox gives the same digests. Needs tar, gzip, sha256sum (coreutils) and
# /bin/busybox (install-deps.sh installs busybox-static).
set -euo pipefail

out=${1:?usage: make-test-image.sh OUT.tar [REF]}
ref=${2:-docker.io/library/busybox:latest}
busybox=${BUSYBOX:-/bin/busybox}
APPLETS="sh ash ls cat echo sleep true false env id ps kill mkdir rm touch head tail wc grep sed \
  printf test [ stat mknod mount uname hostname pwd cp mv ln chmod df du free date yes seq sync"

if [ ! -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1; then
  echo "make-test-image: $busybox is not a runnable busybox (apt-get install busybox-static)" >&2
  exit 1
fi
for tool in tar gzip sha256sum; do
  command -v "$tool" >/dev/null || { echo "make-test-image: $tool is missing" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
layout=$work/layout
mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/root" "$layout/blobs/sha256"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for a in $APPLETS; do ln -s busybox "$root/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

blob() { # FILE -> prints its digest hex, moves it into the layout
  local h
  h=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$layout/blobs/sha256/$h"
  echo "$h"
}
size() { stat -c %s "$layout/blobs/sha256/$1"; }

tar --sort=name --numeric-owner --owner=0 --group=0 --mtime='2024-01-01 00:00:00Z' \
  -C "$root" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$work/layer.tar"
layer=$(blob "$work/layer.tar.gz")

arch=$(uname -m)
case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
cat >"$work/config.json" <<EOF
{"architecture":"$arch","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["sh"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]}}
EOF
config=$(blob "$work/config.json")

cat >"$work/manifest.json" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config","size":$(size "$config")},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer","size":$(size "$layer")}]}
EOF
manifest=$(blob "$work/manifest.json")

cat >"$layout/index.json" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest","size":$(size "$manifest"),"annotations":{"org.opencontainers.image.ref.name":"$ref"}}]}
EOF
printf '{"imageLayoutVersion":"1.0.0"}\n' >"$layout/oci-layout"

tar --sort=name --numeric-owner --owner=0 --group=0 --mtime='2024-01-01 00:00:00Z' \
  -C "$layout" -cf "$out" oci-layout index.json blobs
echo "sha256:$manifest"
