// Run as another user by attach.mpi.test.ts: attaches to the pid in argv[2] and prints the
// Result as JSON on stdout (the test checks that a job it may not trace gives a coded error).
import { attachStarter } from '@mqd/mpir';

const pid = Number(process.argv[2]);
process.stdout.write(`${JSON.stringify(attachStarter(pid))}\n`);
