#!/usr/bin/env bash
# The SkeletonHunter demo: build, bring up a fabric of network namespaces
# (2 ToRs x 3 hosts x 2 containers, a spine, a monitoring namespace), start an
# exporter per container, Prometheus with the shipped rules, Alertmanager with
# the shipped config and the localizer; inject a fault, print the
# localization and the alert as Alertmanager holds it, remove the fault, clean
# up. Run as root on Debian 12; installs what it needs first (idempotent).
#
#   scripts/demo.sh                  # 30% packet loss at a ToR
#   scripts/demo.sh --fault host     # a host's NIC link down
#   scripts/demo.sh --fault node     # one container unreachable
#   scripts/demo.sh --fault link     # one ToR-spine link dead, on a 3-spine
#                                    # multipath fabric probed over 15 flows
#   scripts/demo.sh --help           # all options
#
# Built in release mode: the demo runs twelve exporters, Prometheus,
# Alertmanager and the localizer at once, and the optimized build is what an
# operator deploys. DEMO_PROFILE=dev reuses the debug build of scripts/test.sh
# instead (no second compile).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

profile="${DEMO_PROFILE:-release}"
case "$profile" in
  release) flags=(--release); dir=release ;;
  dev|debug) flags=(); dir=debug ;;
  *) echo "demo.sh: DEMO_PROFILE must be release or dev, not '$profile'" >&2; exit 2 ;;
esac

echo "== building the workspace ($profile)"
cargo build "${flags[@]}" --workspace --bins

target="${CARGO_TARGET_DIR:-target}"
exec "$target/$dir/skeletonhunter-demo" "$@"
