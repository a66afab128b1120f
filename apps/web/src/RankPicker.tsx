// Choosing a world rank: a number field with previous/next over the ranks in the snapshot.
import type { JobSnapshot } from '@mqd/model';
import { useEffect, useState } from 'react';

export function RankPicker({
  snapshot,
  rank,
  onChange,
}: {
  snapshot: JobSnapshot;
  rank: number | null;
  onChange: (rank: number) => void;
}) {
  const [text, setText] = useState(rank === null ? '' : String(rank));
  useEffect(() => setText(rank === null ? '' : String(rank)), [rank]);
  const ranks = snapshot.ranks;
  // Ranks are sorted (a schema invariant): neighbours by binary search.
  const step = (dir: 1 | -1) => {
    if (ranks.length === 0) return;
    const cur = rank ?? -1;
    let lo = 0;
    let hi = ranks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((ranks[mid]?.rank ?? 0) < cur + (dir === 1 ? 1 : 0)) lo = mid + 1;
      else hi = mid;
    }
    const target = dir === 1 ? ranks[lo] : ranks[lo - 1];
    if (target) onChange(target.rank);
  };
  const last = ranks[ranks.length - 1]?.rank ?? 0;
  return (
    <form
      className="rank-picker"
      onSubmit={(e) => {
        e.preventDefault();
        const n = Number(text);
        if (Number.isInteger(n) && n >= 0) onChange(n);
      }}
    >
      <label>
        Rank{' '}
        <input
          type="number"
          min={0}
          max={last}
          value={text}
          onChange={(e) => setText(e.target.value)}
          aria-label="World rank"
          data-testid="rank-input"
        />
      </label>
      <button type="button" onClick={() => step(-1)} title="Previous rank" aria-label="Previous rank">
        ‹
      </button>
      <button type="button" onClick={() => step(1)} title="Next rank" aria-label="Next rank">
        ›
      </button>
      <span className="muted">of 0–{last}</span>
    </form>
  );
}
