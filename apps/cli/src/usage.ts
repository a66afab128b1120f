// Every usage text of `mqd`, and the output seam the commands write to. This module imports
// nothing, so `mqd --help` loads no command, no MPI reader and no server code.

export interface Io {
  out(s: string): void;
  err(s: string): void;
}

export const USAGE = `usage: mqd <command> [options]
commands:
  snapshot   read the message queues of MPI processes (mqd snapshot --help)
  ranks      list the ranks of a job from its starter's pid (mqd ranks --help)
  capture    write a core file of every rank of a hung job, to read later (mqd capture --help)
  run        launch a job under the tool: mqd run [--snapshot] -- mpirun -np 4 ./app
  serve      the dashboard: aggregator + a local agent, SQLite store (mqd serve --help)
  agent      connect this node to an aggregator (mqd agent --help)
  agent-token  print a node's own agent token (admins; mqd agent --help)
exit codes: 0 ok, 1 nothing could be read, 2 usage, 3 partial (some ranks failed)`;

export const SNAPSHOT_USAGE = `usage: mqd snapshot (--attach STARTER_PID | --slurm JOBID[.STEP] | --pid PID[:RANK] [--pid ...]
                     | --core CORE [--rank N] [--exe EXE] [--core ...] | --cores DIR)
                    [--sysroot DIR] [--dll PATH] [--json] [--all] [--explain] [--stacks [--all-threads]]
                    [--eval EXPR [--frame FUNC]]... [--progress EXPR [--frame FUNC]]
  Stops each MPI process for a few milliseconds, reads its message queues through the MPI
  library's debugger DLL and prints them. RANK defaults to the rank in the process environment.
  --attach PID the pid of mpirun/mpiexec: its ranks on this host are found through MPIR
               (or the process tree when the starter has no MPIR symbols)
  --slurm JOBID[.STEP]  a Slurm job (as squeue shows it): its ranks on this node, read for
               the job's owner (ranks on other nodes are read by their nodes' agents)
  --core CORE  read a rank from a core file instead of a running process (repeatable); the rank
               comes from the environment in the core, else from the file name (rank-N.core)
    --rank N   after a --core: that core's rank
    --exe EXE  the executable, when it is no longer where the job ran it (after a --core: for
               that core only)
  --cores DIR  every core in DIR, numbered by the manifest \`mqd capture\` wrote there, else as above
  --sysroot DIR  the job's files (executable, libraries) under DIR at their original paths
               (default with --cores: DIR/sysroot when the capture was made with --bundle)
  --dll PATH   the message-queue DLL (default: MPIR_dll_name in the process)
  --json       print the snapshot as JSON (schema: packages/model/src/snapshot-spec.ts)
  --all        also list empty internal communicators
  --explain    say why the job is stuck: deadlock cycles, near-miss matches, rank classes
               (with --json: {snapshot, explanation})
  --stacks     print the stacks merged into a call-prefix tree (STAT style: ranks per frame as
               ranges), with the classes of identical stacks and the outliers
               (with --json: {snapshot, stackTree[, explanation]})
  --all-threads  with --stacks: every thread of every rank, not only the main thread
  --eval EXPR  read EXPR on every rank in the same stop and print its value per rank, grouped
               ("ranks 0-2,4-7: 42; rank 3: 41"); repeatable. C-like and read-only: names,
               members (. ->), elements [i], slices [a:b] (a to b-1), *p, casts ((int)x,
               (struct s *)p); names resolve in the frame, then its unit's statics, then globals
               (with --json: {snapshot, values})
  --progress EXPR  read EXPR like --eval, as the progress counter (a time step, an
               iteration): the ranks with its smallest number are the least progressed, and the
               diagnosis says so ("Least progressed: rank 3 (step = 41; ranks 0-2, 4-7: 42)");
               ranks that could not read it are named, never taken for 0; nothing is said when
               every rank reads the same number. Once per snapshot (with --json: the values
               carry "progress": true, and {snapshot, values, progressCounter})
  --frame FUNC the frame of the --eval or --progress before it: the innermost frame of
               function FUNC (default: the innermost user frame, outside the MPI and C libraries)`;

export const CAPTURE_USAGE = `usage: mqd capture (--attach STARTER_PID | --slurm JOBID[.STEP] | --pid PID[:RANK] [--pid ...]) --out DIR [--bundle] [--json]
  Writes one core file per rank (rank-N.core, an ELF core like the kernel's, without gdb) and
  a manifest.json into DIR, stopping each rank only while its core is written. The job runs on
  afterwards; kill it when you like: \`mqd snapshot --cores DIR\` reads the queues and stacks of
  the moment of the capture, here or wherever DIR and the job's files are copied.
  --attach PID   the job's starter (mpirun, mpiexec): its ranks on this host
  --slurm JOBID  a Slurm job's ranks on this node
  --pid PID[:RANK]  ranks given directly (RANK defaults to the one in the process environment)
  --out DIR      the capture directory, the job owner's: created for them when it does not exist,
                 else their own plain directory without a capture in it (run as root, everything
                 in DIR is written by the job owner, never by root)
  --bundle       also copy the files the ranks map and the MPI library's DLL into DIR/sysroot,
                 so the capture reads on another machine (mqd snapshot --cores DIR uses them)
  --json         print the manifest as JSON`;

export const RANKS_USAGE = `usage: mqd ranks --attach PID [--method auto|mpir|pmix|process-tree] [--json]
       mqd ranks --slurm JOBID[.STEP] [--json]
       mqd ranks --pid PID[:RANK] [--pid ...] [--json]
  Lists every rank of an MPI job with its pid and host, without stopping anything.
  --attach PID   the job's starter (mpirun, mpiexec): its MPIR process table, else the MPI
                 processes below it
  --method M     auto (default): the MPIR table, else the starter's PMIx server (Open MPI 5's
                 mpirun/prterun), else the process tree; mpir, pmix or process-tree to force one
  --slurm JOBID  a Slurm job's ranks on this node (scontrol listpids; rank from the environment)
  --pid PID[:RANK]  ranks given directly (RANK defaults to the one in the process environment)
  --json         print the job as JSON`;

export const RUN_USAGE = `usage: mqd run [--snapshot] [--json] [--timeout SECONDS] -- STARTER [ARGS...]
  Starts an MPI job under the tool (e.g. mqd run -- mpirun -np 4 ./app), stops the starter at
  MPIR_Breakpoint, prints its process table, then lets the job run and exits with its status.
  Open MPI 5's mpirun (PRRTE's prterun, no MPIR): its ranks are held in PMIx_Init instead
  (prterun --runtime-options stop-in-init), the table comes from its PMIx server (via pmix).
  --snapshot      also take a first snapshot there (Open MPI 4's ranks are then held at the end
                  of MPI_Init, Open MPI 5's in PMIx_Init with no communicator yet; MPICH's are
                  not held, so some may not be in MPI yet)
  --json          print the table (and snapshot) as one JSON document
  --timeout SECS  time for the starter to reach MPIR_Breakpoint, or for every rank to be held
                  (default 60)
  The job inherits this terminal; ^C reaches it directly, SIGTERM/SIGHUP sent to mqd are passed on.`;

export const SERVE_USAGE_HEAD = `usage: mqd serve [--no-local-agent] [--dll-policy any|root-owned] [--core-dir DIR]... [aggregator options]
  Runs the aggregator and an agent for this node in one process (SQLite store in --data-dir;
  MQD_STORE_URL=postgres://... or --store puts it in PostgreSQL, shared by several instances).
  --core-dir DIR (repeatable; MQD_CORE_DIRS=DIR:DIR) lets users open the core files of a
  directory inside DIR as a job (their own cores; admins any).
  Credentials: give each as a file (mode 600, owned by the server's user): --admin-token-file,
  --agent-token-file, --metrics-token-file. A flag shows the secret in \`ps\`; a variable is
  inherited by what is started later (MQD drops both from its environment once read).
  Hang watch: --watch on watches every MPI job the agents discover (--watch-period, --watch-users,
  --watch-stop-budget, --watch-webhook URL...; a job opts out with MQD_WATCH=off); the flags seed
  the policy admins then change in the Fleet view. Webhook URLs carry secrets: prefer
  MQD_WATCH_WEBHOOKS to the flag (never logged or shown).
  Aggregator options (flag, environment variable, meaning): mqd serve --help`;

export const AGENT_USAGE = `usage: mqd agent --server URL [--token-file FILE] [--ca PEM] [--allow-insecure-http] [--host NAME] [--dll PATH] [--dll-policy any|root-owned] [--core-dir DIR]...
  Connects this node to the aggregator and reads the MPI ranks on it on request.
  The node's token comes from --token-file FILE (a file only its owner can read: root for a site
  agent, the user for one run inside their job with srun --overlap); MQD_AGENT_TOKEN works too
  (dropped from the agent's environment once read), never the command line (--token still
  works but shows in \`ps\`; it is deprecated).
  An https:// server is verified against --ca (or the system CAs); http:// is allowed only
  to a loopback address unless --allow-insecure-http.
  --core-dir DIR (repeatable; MQD_CORE_DIRS=DIR:DIR): directories whose core files users may
  open as jobs on this node, as with mqd serve.

usage: mqd agent-token --host NAME --secret-file FILE
  Prints the token of node NAME, derived from the aggregator's agent secret (mqd serve
  --agent-token-file), read from --secret-file FILE (mode 600), else from MQD_AGENT_SECRET.`;
