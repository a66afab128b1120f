// Outliers: the few ranks whose queue shape (classes.ts) or stack (stack-tree.ts) almost no
// other rank shares, the "rank 5 does not look like the other 16,383" of STAT. Named only when
// they are few, in number and in share: 1 of 4 ranks is a quarter of the job, not an outlier,
// and 4,000 ranks in small classes say nothing a list of classes does not say better.

/** At most this many outlier ranks are named. */
export const OUTLIER_MAX_RANKS = 16;
/** Outlier ranks are at most this share of the job. */
export const OUTLIER_MAX_SHARE = 0.05;

/** The largest class whose members are outliers: 1% of the ranks, at least one rank. */
export function rareClassMax(rankCount: number): number {
  return Math.max(1, Math.floor(rankCount / 100));
}

/** Whether `outliers` ranks of `rankCount` are few enough to be named as outliers. */
export function fewEnough(outliers: number, rankCount: number): boolean {
  return outliers > 0 && outliers <= OUTLIER_MAX_RANKS && outliers <= rankCount * OUTLIER_MAX_SHARE;
}

/**
 * The members of the rare classes (at most `rareMax` members and smaller than the largest
 * class), when they are few enough (fewEnough); else none.
 */
export function fewOutliers(
  classes: readonly { readonly members: ArrayLike<number> }[],
  rankCount: number,
  rareMax = rareClassMax(rankCount),
): number[] {
  let largest = 0;
  for (const c of classes) largest = Math.max(largest, c.members.length);
  const out: number[] = [];
  for (const c of classes) {
    const size = c.members.length;
    if (size > rareMax || size >= largest) continue;
    for (let i = 0; i < size; i++) out.push(c.members[i] ?? 0);
    if (out.length > OUTLIER_MAX_RANKS) return [];
  }
  return fewEnough(out.length, rankCount) ? out : [];
}

/**
 * Why a rank is marked an outlier, as its tooltip or legend says it: "a queue shape at most
 * 163 of the 16,384 ranks share" / "a queue shape no other of the 200 ranks has".
 */
export function outlierWhy(what: string, rankCount: number): string {
  const max = rareClassMax(rankCount);
  const n = rankCount.toLocaleString('en-US');
  return max === 1
    ? `${what} no other of the ${n} ranks has`
    : `${what} at most ${max.toLocaleString('en-US')} of the ${n} ranks share`;
}
