// Links of the fleet pages: real links (they open in a new tab too) that a plain click follows
// inside the page, through the URL state.
import type { MouseEvent } from 'react';

export type LinkProps = { href: string; onClick: (e: MouseEvent<HTMLAnchorElement>) => void };

/** A click handler that runs `go` for a plain left click and leaves the others to the browser. */
export function follow(go: () => void): (e: MouseEvent<HTMLAnchorElement>) => void {
  return (e) => {
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    go();
  };
}
