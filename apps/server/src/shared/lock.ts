// An in-process lock: tasks under the same key run one after the other, in call order. For the
// few read-decide-write sequences whose state is this process's own (the watcher's live jobs,
// the watch policy it holds): the store cannot make them one transaction, and since the store
// is awaited other requests' code may run between their steps. A task's failure is its caller's
// alone: the next task under the key still runs.
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const result = before.then(task, task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
