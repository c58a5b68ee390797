#!/usr/bin/env bash
# The localizer's accuracy on both scenario generators, side by side, in one
# run on one release build:
#   - the project's simulator (`skeletonhunter-localizer bench`: 240
#     scenarios, the multipath scenarios and the 1,024-host speed case);
#   - the blind generator (tests/blind: written without reading the engine,
#     small, medium and large fabrics).
# Both draw a fresh seed each run and print it (SEED=S replays the
# simulator; BLIND_SEED=S the blind generator). A benchmark, not a test:
# nothing here asserts a figure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

fresh() { od -An -N4 -tu4 /dev/urandom | tr -d ' '; }
seed=${SEED:-$(fresh)}
blind_seed=${BLIND_SEED:-$(fresh)}
scenarios=${SCENARIOS:-240}
windows=${WINDOWS:-510}

cargo build --release -q -p skeletonhunter-localizer
bin="${CARGO_TARGET_DIR:-target}/release/skeletonhunter-localizer"

echo "== simulator: $bin bench --scenarios $scenarios --seed $seed"
"$bin" bench --scenarios "$scenarios" --seed "$seed"
echo
echo "== blind generator: tests/blind/score.py --windows $windows --seed $blind_seed"
python3 tests/blind/score.py --analyze "$bin" --windows "$windows" \
  --sizes small,medium,large --seed "$blind_seed"
