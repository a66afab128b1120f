// The wire between `mqd capture` and its owner child (capture-owner-main.ts), which makes
// everything of a capture directory that the job can influence, as the job's owner; the
// messages around these requests are owner-child.ts's.
/** The capture directory as the child found or made it: its identity pins it for later requests. */
export interface PreparedDir {
  readonly dev: number;
  readonly ino: number;
  /** True when the child created it. */
  readonly created: boolean;
}

/** Where the capture directory goes: the owner could not create it (no write access above it). */
export interface NeedsRoot {
  readonly needsRoot: string;
}

export interface Bundled {
  readonly files: number;
  readonly bytes: number;
  /** Files the owner could not copy, each with why (shown as warnings). */
  readonly skipped: readonly string[];
}

export type OwnerRequest =
  /** Find or create `dir` (an absolute path): the owner's plain directory, holding no capture. */
  | { readonly type: 'prepare'; readonly dir: string }
  /**
   * Copy under DIR/sysroot the files the ranks `pids` map (their /proc/PID/maps, read as the
   * owner), plus `extra` (the DLL the ranks name), each opened with the owner's rights.
   */
  | {
      readonly type: 'bundle';
      readonly dir: string;
      readonly at: PreparedDir;
      readonly pids: readonly number[];
      readonly extra: readonly string[];
    }
  /** Write DIR/manifest.json (a new file, never through a link). */
  | {
      readonly type: 'manifest';
      readonly dir: string;
      readonly at: PreparedDir;
      readonly text: string;
    };

/** What the requests answer: prepare, bundle and manifest in turn. */
export type OwnerAnswer = PreparedDir | NeedsRoot | Bundled | null;
