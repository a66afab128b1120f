#!/usr/bin/env bash
# The demo: provisions what is missing, builds, starts a real hung MPI job (Open MPI, 4 ranks,
# a receive waiting for a tag that never comes) and the dashboard attached to it, with SQLite
# in .mqd-data/. Prints the login URL. Ctrl-C stops the job and the server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision.sh
npx turbo run build --output-logs=errors-only
exec node scripts/demo.mjs "$@"
