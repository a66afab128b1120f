// Folds as they cross between aggregator instances (rank-fold.ts encodeFolds/decodeFolds): what
// the holder encodes the asker decodes to the same folds, and bytes that are not such folds are
// refused rather than summed into a stored snapshot's counts and digest.
import { deflateRawSync } from 'node:zlib';
import { mqdError, rankNotRead, syntheticRingRank } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { decodeFolds, encodeFolds, rankFold } from '../src/hub/rank-fold.js';

const RANKS = [
  ...[0, 1, 2].map((r) => syntheticRingRank(r, 100 + r, 'n1', 4, 1, 0)),
  rankNotRead({ rank: 3, pid: 103, host: 'n1' }, mqdError('MQD_E_NO_SUCH_PID', 'gone')),
];

describe('folds between instances', () => {
  it('decode(encode(folds)) is the folds, error ranks (a code) included', async () => {
    const folds = RANKS.map(rankFold);
    expect(folds[3]).toMatchObject({ kind: 'error', code: 'MQD_E_NO_SUCH_PID' });
    expect(decodeFolds(await encodeFolds(folds, 3))).toEqual(folds);
    // Deflated: far smaller than the folds' JSON (the digest lines repeat from rank to rank).
    const many = Array.from({ length: 100 }, (_, r) => rankFold(syntheticRingRank(r, r + 1, 'n', 100, 1, 0)));
    expect((await encodeFolds(many, 3)).length).toBeLessThan(JSON.stringify(many).length / 4);
  });

  it('refuses bytes that are not folds: not deflate, not tuples, a field of the wrong type', () => {
    const deflated = (x: unknown) => deflateRawSync(Buffer.from(JSON.stringify(x)));
    const good = [0, 'ok', null, '0|ok|', 1, 2, 3];
    expect(decodeFolds(deflated([good]))).toHaveLength(1);
    expect(decodeFolds(Buffer.from('not deflate at all'))).toBeNull();
    expect(decodeFolds(deflated({ 0: good }))).toBeNull();
    expect(decodeFolds(deflated([good.slice(0, 6)]))).toBeNull();
    expect(decodeFolds(deflated([[...good.slice(0, 4), '1', 2, 3]]))).toBeNull();
    expect(decodeFolds(deflated([[0.5, ...good.slice(1)]]))).toBeNull();
  });
});
