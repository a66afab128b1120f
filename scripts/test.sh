#!/usr/bin/env bash
# The one test command (README, .ci/run): provisions whatever is missing (Debian packages,
# the debug-enabled Open MPI and MPICH builds, node modules), then runs every check:
# format + lint, import direction, type-check + build, unit tests, real-MPI tests, browser e2e
# (Playwright driving Debian's chromium, run as vitest's e2e project).
# Ends with one line "N passed, N failed" over all test runners.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
# This shell's start (clock ticks after boot): every process started after it is the run's.
run_ticks=$(awk '{print $22}' /proc/$$/stat)
step() { printf '\n=== %s\n' "$*"; }

step "provision (apt packages, debug MPI builds, node modules)"
p0=$(date +%s)
bash scripts/provision.sh || { echo "MQD_E_PROVISION: provisioning failed (see above)"; exit 1; }
echo "provisioning took $(( $(date +%s) - p0 )) s"

failed=0
step "lint + format (biome)"
npx biome ci --colors=off . || failed=1
step "import direction"
node scripts/check-imports.mjs || failed=1
step "cited files exist"
node scripts/check-refs.mjs || failed=1
step "type-check + build (turbo)"
npx turbo run typecheck build --output-logs=errors-only || failed=1
if [ $failed != 0 ]; then
  echo "static checks failed: fix them first"
  echo "0 passed, 1 failed"
  exit 1
fi

rm -rf .test-results && mkdir -p .test-results
# One project after the other: real MPI jobs and the browser must not compete for the 2 cores.
vitest_rc=0
for project in unit mpi e2e; do
  step "vitest project $project"
  npx vitest run --project "$project" --reporter=default --reporter=json --outputFile=".test-results/$project.json" || vitest_rc=1
done
step "no process left in a tracing stop"
node scripts/tracing-stops.mjs --since "$run_ticks" --report .test-results/tracing-stops.json || vitest_rc=1
step "summary"
node scripts/summarize-tests.mjs .test-results
sum_rc=$?
echo "total time $(( $(date +%s) - t0 )) s"
[ $vitest_rc = 0 ] && [ $sum_rc = 0 ]
