// Where separate debug files are looked for: the search path (MQD_DEBUGINFO_PATH, else libdw's
// default) and the files libdw's standard search tries, for messages that say where to install one.

/** libdw's search path when MQD_DEBUGINFO_PATH is unset (its DEFAULT_DEBUGINFO_PATH). */
export const DEFAULT_DEBUGINFO_PATH = ':.debug:/usr/lib/debug';

/** Where separate debug files are searched (MQD_DEBUGINFO_PATH, else libdw's default). */
export function debuginfoPath(): string {
  return process.env['MQD_DEBUGINFO_PATH'] ?? DEFAULT_DEBUGINFO_PATH;
}

/**
 * The files libdw's standard search (dwfl_standard_find_debuginfo) tries for the debug file of
 * `path`, in its order: by build-id under each absolute directory of the search path, then the
 * `.gnu_debuglink` name (`<file name>.debug` without one) in the file's directory (empty entry),
 * under it (relative entry) or under the entry followed by the file's directory (absolute entry).
 * For messages that say where to install a missing debug file.
 */
export function debugFileSearch(path: string, buildId: string | null, debuglink: string | null): string[] {
  const dir = path.slice(0, Math.max(path.lastIndexOf('/'), 0)); // '' for a file in /
  const link = debuglink ?? `${path.slice(path.lastIndexOf('/') + 1)}.debug`;
  // A leading '+' or '-' only says whether to check the CRC.
  const entries = debuginfoPath()
    .split(':')
    .map((e) => e.replace(/^[+-]/, ''));
  const out: string[] = [];
  if (buildId && buildId.length > 2) {
    for (const e of entries) {
      if (e.startsWith('/')) out.push(`${e}/.build-id/${buildId.slice(0, 2)}/${buildId.slice(2)}.debug`);
    }
  }
  for (const e of entries) {
    if (e === '') out.push(`${dir}/${link}`);
    else if (e.startsWith('/')) out.push(`${e}${dir}/${link}`);
    else out.push(`${dir}/${e}/${link}`);
  }
  return [...new Set(out)];
}
