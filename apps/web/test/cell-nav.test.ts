import { describe, expect, it } from 'vitest';
import { moveCell } from '../src/matrix/cell-nav.js';
import { ANY_PEER } from '../src/matrix/edges.js';

const ctx = { n: 10, blockSize: 4, page: 2 };

describe('matrix keyboard moves', () => {
  it('moves by one block of the level on screen, from any cell inside it', () => {
    expect(moveCell({ row: 5, col: 6, size: 1 }, 'ArrowRight', false, ctx)).toEqual({
      row: 4,
      col: 8,
      size: 4,
    });
    expect(moveCell({ row: 5, col: 6, size: 1 }, 'ArrowUp', false, ctx)).toEqual({ row: 0, col: 4, size: 4 });
    expect(moveCell({ row: 0, col: 0, size: 4 }, 'ArrowLeft', false, ctx)).toEqual({
      row: 0,
      col: 0,
      size: 4,
    });
    expect(moveCell({ row: 0, col: 0, size: 4 }, 'x', false, ctx)).toBeNull();
  });

  it('steps into the strips past the last row and column, never into their empty corner', () => {
    expect(moveCell({ row: 8, col: 0, size: 4 }, 'ArrowDown', false, ctx)).toEqual({
      row: ANY_PEER,
      col: 0,
      size: 4,
    });
    expect(moveCell({ row: 0, col: 8, size: 4 }, 'ArrowRight', false, ctx)).toEqual({
      row: 0,
      col: ANY_PEER,
      size: 4,
    });
    expect(moveCell({ row: ANY_PEER, col: 8, size: 4 }, 'ArrowRight', false, ctx)).toEqual({
      row: ANY_PEER,
      col: 8,
      size: 4,
    });
    expect(moveCell({ row: 8, col: ANY_PEER, size: 4 }, 'ArrowDown', false, ctx)).toEqual({
      row: 8,
      col: ANY_PEER,
      size: 4,
    });
  });

  it('Home/End go to the row ends, with Ctrl to the corners; PageUp/PageDown by a screen', () => {
    const one = { n: 100, blockSize: 1, page: 10 };
    expect(moveCell({ row: 50, col: 50, size: 1 }, 'Home', false, one)).toEqual({ row: 50, col: 0, size: 1 });
    expect(moveCell({ row: 50, col: 50, size: 1 }, 'End', false, one)).toEqual({ row: 50, col: 99, size: 1 });
    expect(moveCell({ row: 50, col: 50, size: 1 }, 'End', true, one)).toEqual({ row: 99, col: 99, size: 1 });
    expect(moveCell({ row: 50, col: 50, size: 1 }, 'Home', true, one)).toEqual({ row: 0, col: 0, size: 1 });
    expect(moveCell({ row: 50, col: 3, size: 1 }, 'PageDown', false, one)).toEqual({
      row: 60,
      col: 3,
      size: 1,
    });
    expect(moveCell({ row: 5, col: 3, size: 1 }, 'PageUp', false, one)).toEqual({ row: 0, col: 3, size: 1 });
    // The last page stops on the last rank row (also when a page is the whole side); the next one reaches the ANY strip.
    expect(moveCell({ row: 0, col: 3, size: 1 }, 'PageDown', false, { ...one, page: 100 })).toEqual({
      row: 99,
      col: 3,
      size: 1,
    });
    expect(moveCell({ row: 95, col: 3, size: 1 }, 'PageDown', false, one)).toEqual({
      row: 99,
      col: 3,
      size: 1,
    });
    expect(moveCell({ row: 99, col: 3, size: 1 }, 'PageDown', false, one)).toEqual({
      row: ANY_PEER,
      col: 3,
      size: 1,
    });
  });
});
