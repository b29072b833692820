#!/usr/bin/env bash
# Installs the Debian packages gpusched needs to build and test, and nothing else.
# Idempotent: prints nothing and touches nothing when every package is present.
# Usage: install-deps.sh [--fuzz]
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libjansson-dev libyaml-dev libcmocka-dev
  libmicrohttpd-dev
  python3 python3-pytest python3-yaml
  prometheus
  # node execution (layer 3): kubelet device plugin API over gRPC, and its Python test peer
  libgrpc-dev libprotobuf-c-dev protobuf-c-compiler python3-grpcio python3-grpc-tools
)
# --- the node's image store (src/node/image*.c): libarchive unpacks layers; busybox-static is the
# test image's content (scripts/make-test-image.sh) ---
PKGS+=(libarchive-dev busybox-static)
# --- end image store ---
# --- control plane (src/control): HTTP server, TLS, store, HTTP client; requests for its tests ---
PKGS+=(
  libmicrohttpd-dev libgnutls28-dev libsqlite3-dev sqlite3 libcurl4-gnutls-dev python3-requests
)
# the fake kube-apiserver (tests/kube) makes its CA and certificates with the openssl CLI
PKGS+=(openssl)
# kubectl (v1.32) drives tests/integration/test_kubectl_safety.py, and `kubectl kustomize` renders
# deploy/ for tests/integration/test_deploy.py and tests/kube/test_rbac.py (each fails without it); it
# is not a Debian package: install it from the Kubernetes apt repository (pkgs.k8s.io).
if ! command -v kubectl >/dev/null; then echo "install-deps: kubectl not found (see pkgs.k8s.io)" >&2; fi
# --- end control plane ---
# --- etcd store backend: the integration tests start real etcd members (tests/integration/etcd.py) ---
PKGS+=(etcd-server etcd-client)
# --- end etcd ---
# --- web console (/ui): headless Chromium and the WebDriver that tests/integration/browser.py drives;
# Pillow reads its screenshots back to check they are not blank ---
PKGS+=(chromium chromium-driver python3-selenium python3-pil)
# --- end web console ---
# --- the agent's runc runtime (src/agent/runtime_runc.c) and its tests: runc runs the OCI bundles;
# busybox-static is what tests/integration/test_runc.py's image is built from ---
PKGS+=(runc)
# --- end runc ---
# `--fuzz`: clang and its libFuzzer runtime, needed only by `make fuzz`.
if [ "${1:-}" = "--fuzz" ]; then
  PKGS+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's etcd-server starts a system etcd on 2379/2380 when installed; the tests start their own
# members on free ports and want no cluster beside them, so that one is stopped and kept off.
if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now etcd.service >/dev/null 2>&1 ||
    echo "install-deps: could not stop the system etcd service (the tests use their own ports)" >&2
fi
