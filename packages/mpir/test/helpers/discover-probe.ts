// Run by discover.test.ts under strace: one discovery scan and one counters read of the pids
// given on the command line (`pid:startTime:uid` each), the results as JSON on stdout.
import { discoverJobs, rankCounters } from '@mqd/mpir';

const targets = process.argv.slice(2).map((a, rank) => {
  const [pid, startTime, uid] = a.split(':');
  return { rank, pid: Number(pid), startTime: startTime ?? '', uid: Number(uid) };
});
const jobs = discoverJobs();
const counters = targets.map((t) => rankCounters([t], t.uid));
process.stdout.write(JSON.stringify({ jobs, counters }));
