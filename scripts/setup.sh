#!/usr/bin/env bash
# Install everything SkeletonHunter needs to build, test and demo on Debian 12.
# Idempotent: packages already present are skipped. Run as root.
set -euo pipefail

PKGS=(
  build-essential pkg-config cmake clang llvm libbpf-dev
  libnl-3-dev libnl-route-3-dev libibverbs-dev ibverbs-providers rdma-core
  iproute2 nftables procps curl jq ca-certificates python3-pip systemd
  prometheus prometheus-alertmanager victoria-metrics prometheus-smokeping-prober
  chromium chromium-driver python3-selenium jsonnet
  mmdebstrap umoci skopeo libcap2-bin
  stress-ng   # not used by the tests: the load the suite must pass beside (docs/reliability.md)
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages and creates network namespaces)" >&2
  exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Debian packages start their daemons; the tests and the demo start their
# own instances on loopback inside namespaces, so stop the system ones.
for svc in prometheus prometheus-alertmanager victoria-metrics prometheus-smokeping-prober prometheus-node-exporter; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup.sh: installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

# Tracepoints need tracefs; mount it when the kernel has it but it is not mounted.
if [ -d /sys/kernel/tracing ] && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || echo "setup.sh: could not mount tracefs (eBPF discovery will use its fallback)"
fi

# kubernetes-validate checks deploy/kubernetes/ (tests/tests/ops/deploy.rs).
# Only when missing, so an offline re-run does not fail.
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  echo "setup.sh: installing kubernetes-validate (pip)"
  python3 -m pip install -q kubernetes-validate 2>/dev/null ||
    python3 -m pip install -q --break-system-packages kubernetes-validate
fi

# grafana-foundation-sdk (Grafana's typed dashboard models) parses the shipped
# dashboards (tests/tests/ops/dashboards_sdk.rs). Only when missing.
if ! python3 -c 'import grafana_foundation_sdk' >/dev/null 2>&1; then
  echo "setup.sh: installing grafana-foundation-sdk (pip)"
  python3 -m pip install -q grafana-foundation-sdk 2>/dev/null ||
    python3 -m pip install -q --break-system-packages grafana-foundation-sdk
fi
