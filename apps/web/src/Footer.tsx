// The status bar: the keys, and which MPI library and message-queue DLL read the snapshot (by
// name and version; the DLL's full path and its own version string are in the tooltip).
import { type JobSnapshot, LIBRARY_NAME } from '@mqd/model';

/** What the footer says about the library: a name and, when known, a version; the path apart. */
export interface LibraryLabel {
  readonly text: string;
  /** The DLL's full path and version string, for the tooltip; '' without a DLL. */
  readonly title: string;
}

const VERSION = /\b(\d+\.\d+(?:\.\d+)?(?:[ab]\d+|rc\d+)?)\b/;
// A version in a directory of the path: /opt/openmpi-4.1.4/lib/..., /sw/mpich/4.2.1/lib/...
const PATH_VERSION = /(?:openmpi|ompi|mpich)[-_/]?v?(\d+\.\d+(?:\.\d+)?)(?=[/_-]|$)/i;

/**
 * The library that read the snapshot: "Open MPI 4.1.4 · libompi_dbg_msgq.so". The version comes
 * from the DLL's version string when it names one (MPICH's does), else from the install path;
 * it is left out when neither says.
 */
export function libraryLabel(mpi: JobSnapshot['mpi'], dllVersion: string | null): LibraryLabel {
  const name = mpi.library === 'unknown' ? 'Unknown MPI library' : LIBRARY_NAME[mpi.library];
  if (mpi.dll === null) return { text: `${name} · no message-queue DLL`, title: '' };
  const version =
    (dllVersion === null ? null : VERSION.exec(dllVersion)?.[1]) ?? PATH_VERSION.exec(mpi.dll)?.[1];
  const file = mpi.dll.slice(mpi.dll.lastIndexOf('/') + 1) || mpi.dll;
  const title = dllVersion ? `${mpi.dll}\n${dllVersion}` : mpi.dll;
  return { text: `${name}${version ? ` ${version}` : ''} · ${file}`, title };
}

/** The version string of the DLL that read the first rank read with one; null when none says. */
export function dllVersionOf(snapshot: Pick<JobSnapshot, 'ranks'> | null): string | null {
  for (const r of snapshot?.ranks ?? []) if (r.dll !== undefined) return r.dll.version;
  return null;
}

export function Footer({
  livePage,
  mpi,
  dllVersion,
}: {
  livePage: boolean;
  mpi: JobSnapshot['mpi'] | null;
  dllVersion: string | null;
}) {
  const lib = mpi === null ? null : libraryLabel(mpi, dllVersion);
  return (
    <footer className="statusbar">
      <span>
        Keys: <kbd>j</kbd> jobs <kbd>m</kbd> matrix <kbd>t</kbd> timeline <kbd>o</kbd> order <kbd>r</kbd> rank{' '}
        <kbd>s</kbd> stacks
        {livePage && (
          <>
            {' '}
            <kbd>f</kbd> fleet
          </>
        )}{' '}
        <kbd>v</kbd> count/size <kbd>Esc</kbd> clear selection
      </span>
      {lib !== null && (
        <span className="muted" title={lib.title || undefined} data-testid="footer-library">
          {lib.text}
        </span>
      )}
    </footer>
  );
}
