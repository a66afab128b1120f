#!/usr/bin/env bash
# The demo: provisions what the demo needs (Debian packages, the one MPI build it runs, the
# OpenMP runtime only for a hybrid fixture, node modules), builds, starts a real hung MPI job
# (Open MPI, 4 ranks, a receive waiting for a tag that never comes) and the dashboard attached
# to it, with SQLite in .mqd-data/. Prints the login URL. Ctrl-C stops the job and the server.
# `npm test` provisions the whole test matrix; the demo's first run builds one MPI only.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
mpi=openmpi; fixture=wrong_tag
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --mpi) mpi=${args[$((i + 1))]:-$mpi} ;;
    --mpi=*) mpi=${args[$i]#--mpi=} ;;
    --fixture) fixture=${args[$((i + 1))]:-$fixture} ;;
    --fixture=*) fixture=${args[$i]#--fixture=} ;;
  esac
done
openmp=(--no-openmp)
case "$fixture" in omp_*) openmp=() ;; esac
echo "[demo] 1/3 provisioning what the $mpi demo needs (a fresh machine: ~8-12 min on 2 cores, mostly the $mpi build; then seconds)"
bash scripts/provision.sh --only "$mpi" "${openmp[@]}"
echo "[demo] 2/3 building the dashboard (~1 min the first time)"
npx turbo run build --output-logs=errors-only
echo "[demo] 3/3 starting the job and the server ($(( $(date +%s) - t0 )) s so far)"
exec node scripts/demo.mjs "$@"
