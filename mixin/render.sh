#!/usr/bin/env bash
# Render the monitoring mixin into rules/*.yml, rules/pair-detail/*.yml and
# dashboards/*.json.
#   mixin/render.sh          rewrite the shipped files in this repository
#   mixin/render.sh DIR      write them under DIR (DIR/rules, DIR/dashboards)
#   mixin/render.sh DIR CFG  the same with _config overrides CFG, a jsonnet
#                            object such as '{nativeHistograms: true}'
# Needs Debian's `jsonnet` (scripts/setup.sh installs it).
set -euo pipefail
mixin="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$mixin/..}"
if ! command -v jsonnet >/dev/null 2>&1; then
  echo "render.sh: jsonnet not found (apt-get install jsonnet, or run scripts/setup.sh)" >&2
  exit 2
fi
mkdir -p "$out/rules/pair-detail" "$out/dashboards"
jsonnet -J "$mixin" -S -m "$out" --tla-code "config=${2:-{\}}" "$mixin/render.jsonnet" >/dev/null
