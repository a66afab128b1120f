// One DebugFile per file on disk, shared by every process of the reader that maps it: by
// (device, inode, mtime), and by build-id so that two paths of one build share the index.
import { DebugFile } from './debug-file.js';

/** Files by build-id (or path when a file has none), shared by every process that maps them. */
export class DebugFileRegistry {
  private readonly byKey = new Map<string, DebugFile>();
  private readonly byBuildId = new Map<string, DebugFile>();

  /** `key` identifies the file on disk (dev:inode:mtime); `path` opens it. */
  get(key: string, path: string): DebugFile | string {
    const hit = this.byKey.get(key);
    if (hit) return hit;
    const f = DebugFile.open(path);
    if (typeof f === 'string') return f;
    if (f.buildId) {
      const same = this.byBuildId.get(f.buildId);
      if (same) {
        f.close();
        this.byKey.set(key, same);
        return same;
      }
      this.byBuildId.set(f.buildId, f);
    }
    this.byKey.set(key, f);
    return f;
  }

  get size(): number {
    return this.byBuildId.size;
  }
}
