#!/usr/bin/env bash
# Every benchmark, each with its baseline measured in the same run; JSON into bench/results/.
# Speed targets live here, never in timed unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision.sh
npx turbo run build --output-logs=errors-only
mkdir -p bench/results
run() { echo "--- $1"; shift; "$@"; }
run "mqd-core snapshot (real Open MPI and MPICH, 4 ranks)" node --import tsx packages/mqd-core/bench/snapshot.bench.ts
run "mqd-core stacks in the same stop (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/stacks.bench.ts
run "mqd-core OpenMP (OMPD) in the same stop (real hybrid Open MPI and MPICH jobs)" node --import tsx packages/mqd-core/bench/openmp.bench.ts
run "mqd-core deep queues: 20,000 + 20,000 on one rank vs a 3-rank ring (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/deep-queues.bench.ts
run "mqd-core warm 4-rank snapshot vs a direct resolved read (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/warm-path.bench.ts
run "mqd-core cold CLI: mqd --help vs node -e 0, a cold 4-rank mqd snapshot (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/cli-cold.bench.ts
# --conditions=source: this bench takes its conformance kit from @mqd/core/testing (TypeScript
# sources), so @mqd/core must come from the sources too, or koffi sees its types declared twice.
run "mqd-core parallel readers: 64 ranks of one DLL (conformance targets)" node --conditions=source --import tsx packages/mqd-core/bench/parallel-readers.bench.ts
run "mqd-core many ranks: 64 real ranks of a hung ring on one node, pool vs one reader (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/many-ranks.bench.ts
run "mqd-core reader memory over 1,000 snapshots (real Open MPI and MPICH)" node --import tsx packages/mqd-core/bench/reader-memory.bench.ts
[ -f packages/model/bench/analysis.bench.ts ] && run "hang analysis (16,384 ranks)" node --import tsx packages/model/bench/analysis.bench.ts
run "hang watch overhead: a fixed-work compute job under no watcher and the watcher at the default, 10 s and 1 s periods (real MPICH)" node --conditions=source --import tsx apps/cli/bench/watch-overhead.bench.ts
[ -f apps/server/bench/fanin.bench.ts ] && run "aggregator fan-in (256 agents x 64 ranks)" node --import tsx apps/server/bench/fanin.bench.ts
[ -f apps/server/bench/scale-out.bench.ts ] && run "scale-out: 100,000 ranks from 1,000 agents (10 processes), one instance and two behind haproxy, first render in chromium" node --import tsx apps/server/bench/scale-out.bench.ts
[ -f e2e/bench/matrix.bench.mjs ] && run "dashboard matrix (16,384 ranks, chromium)" node e2e/bench/matrix.bench.mjs
[ -f e2e/bench/comm-menu.bench.mjs ] && run "dashboard communicator menu (16,384 ranks, chromium)" node e2e/bench/comm-menu.bench.mjs
[ -f e2e/bench/stacks.bench.mjs ] && run "dashboard stacks view (16,384 ranks, chromium)" node e2e/bench/stacks.bench.mjs
[ -f packages/model/bench/stacks.bench.ts ] && run "stack tree merge (16,384 ranks)" node --import tsx packages/model/bench/stacks.bench.ts
[ -f e2e/bench/triage.bench.ts ] && run "triage: Jobs and Fleet with 10,000 stored jobs (20 hung), hung first and a search, chromium" node --conditions=source --import tsx e2e/bench/triage.bench.ts
echo "results: bench/results/*.json (see docs/benchmarks.md)"
