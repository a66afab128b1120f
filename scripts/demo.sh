#!/usr/bin/env bash
# The demo: node modules and the dashboard's build first (all the server needs), then
# scripts/demo.mjs brings the dashboard up on a SYNTHETIC hung job and prints its link, while it
# provisions the one MPI build the real job needs (scripts/provision.sh --only MPI, the OpenMP
# runtime only for a hybrid fixture) and shows on the page what is being built and how long it
# has left. Then it starts the real hung job (Open MPI, 4 ranks, a receive waiting for a tag that
# never comes), attaches it, and the page and a new printed link move to it. SQLite in
# .mqd-data/. Ctrl-C stops the job, the provisioning and the server.
# `npm test` provisions the whole test matrix; the demo's first run builds one MPI only.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
since() { echo $(( $(date +%s) - $1 )); }

# The server needs no Debian package beyond Node itself: the ones the MPI build and the reader
# need come with the provisioning that demo.mjs runs behind the synthetic job.
t=$(date +%s)
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[demo] 1/3 installing node modules"
  # npm install (not npm ci), as scripts/provision.sh does: npm ci refuses this lock file.
  npm install --no-audit --no-fund --loglevel=error
  echo "[demo] node modules: $(since "$t") s"
else
  echo "[demo] 1/3 node modules: up to date"
fi
t=$(date +%s)
echo "[demo] 2/3 building the dashboard"
npx turbo run build --output-logs=errors-only
echo "[demo] built in $(since "$t") s"
echo "[demo] 3/3 the dashboard on a synthetic job, then the real job ($(since "$t0") s so far)"
exec node scripts/demo.mjs "$@"
