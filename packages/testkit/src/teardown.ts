// Teardown that does not stop at the first failure: a test rig's afterAll must still kill the
// agents, the jobs and the namespaces when one of them fails to go, and report every failure.

/**
 * Runs every step in order, each even when an earlier one threw, then throws all the failures
 * together (an AggregateError named by `label`). Steps may be async; a step that is not needed
 * (nothing was started) returns without doing anything.
 */
export async function teardownAll(label: string, steps: readonly (() => unknown)[]): Promise<void> {
  const problems: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      problems.push(e);
    }
  }
  if (problems.length > 0) throw new AggregateError(problems, `${label} teardown failed`);
}
