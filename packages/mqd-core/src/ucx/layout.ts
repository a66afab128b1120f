// Where UCX keeps a worker's tag-matching state, as byte offsets taken from the DWARF of the
// libucp.so the rank maps (never a table of guesses: a UCX without debug info, or one whose
// structures lack a field, is MQD_E_UCX_UNSUPPORTED naming what is missing). The structures are
// UCX's (src/ucp/core/ucp_worker.h, src/ucp/tag/tag_match.h, src/ucp/core/ucp_request.h,
// src/ucp/tag/eager.h, src/ucp/rndv/rndv.h); docs in ../../REFERENCE.md, "UCX queues".
import type { DebugFile, TypeRef } from '../inferior/debug-file.js';

/** Byte offsets (and sizes) of what the UCX walk reads. */
export interface UcxLayout {
  /** ucp_worker_t: tm.expected.wildcard, .hash, .sw_all_count; tm.unexpected.all; tm.offload.iface, .tag_hash.size */
  readonly wildcard: number;
  readonly hash: number;
  readonly swAllCount: number;
  readonly unexpectedAll: number;
  readonly offloadIface: number;
  readonly offloadHashSize: number;
  /** ucp_request_queue_t: .queue.head, .queue.ptail, and its size (one hash bucket) */
  readonly queueHead: number;
  readonly queueTail: number;
  readonly queueSize: number;
  /** ucp_request_t: recv.queue (the element the queues link), recv.buffer, .length, .tag.tag, .tag.tag_mask, .tag.sn */
  readonly reqQueue: number;
  readonly reqBuffer: number;
  readonly reqLength: number;
  readonly reqTag: number;
  readonly reqMask: number;
  readonly reqSn: number;
  /** ucs_list_link_t: .next, and its size (ucp_recv_desc_t.tag_list[1] is the `all` list's link) */
  readonly listNext: number;
  readonly listSize: number;
  /** ucp_recv_desc_t: .tag_list, .length, .payload_offset, .flags, and its size (the header follows it) */
  readonly rdescTagList: number;
  readonly rdescLength: number;
  readonly rdescPayload: number;
  readonly rdescFlags: number;
  readonly rdescSize: number;
  /** ucp_eager_first_hdr_t.total_len, ucp_rndv_rts_hdr_t.size: a multi-fragment or rendezvous message's length */
  readonly eagerFirstTotal: number;
  readonly rtsSize: number;
}

/** The layout, or the first `type.field` the library's DWARF lacks. */
export type UcxLayoutResult =
  | { readonly ok: true; readonly layout: UcxLayout }
  | { readonly ok: false; readonly missing: string };

const cache = new WeakMap<DebugFile, UcxLayoutResult>();

/** The layout read from one libucp.so's DWARF (once per file). */
export function ucxLayout(file: DebugFile): UcxLayoutResult {
  let hit = cache.get(file);
  if (hit === undefined) {
    hit = resolve(file);
    cache.set(file, hit);
  }
  return hit;
}

class Missing extends Error {}

function resolve(file: DebugFile): UcxLayoutResult {
  if (!file.hasDwarf()) return { ok: false, missing: 'libucp.so has no DWARF (debug info)' };
  const types = new Map<string, TypeRef>();
  const type = (names: readonly string[]): TypeRef => {
    for (const n of names) {
      const known = types.get(n) ?? file.findType(n);
      if (known) {
        types.set(n, known);
        return known;
      }
    }
    throw new Missing(names[0]);
  };
  const off = (names: readonly string[], field: string): number => {
    const o = file.fieldOffset(type(names), field);
    if (o < 0) throw new Missing(`${names[0]}.${field}`);
    return o;
  };
  const size = (names: readonly string[]): number => {
    const s = file.sizeOf(type(names));
    if (s <= 0) throw new Missing(`sizeof(${names[0]})`);
    return s;
  };
  const W = ['ucp_worker_t', 'ucp_worker'];
  const Q = ['ucp_request_queue_t'];
  const R = ['ucp_request_t', 'ucp_request'];
  const L = ['ucs_list_link_t', 'ucs_list_link'];
  const D = ['ucp_recv_desc_t', 'ucp_recv_desc'];
  try {
    return {
      ok: true,
      layout: {
        wildcard: off(W, 'tm.expected.wildcard'),
        hash: off(W, 'tm.expected.hash'),
        swAllCount: off(W, 'tm.expected.sw_all_count'),
        unexpectedAll: off(W, 'tm.unexpected.all'),
        offloadIface: off(W, 'tm.offload.iface'),
        offloadHashSize: off(W, 'tm.offload.tag_hash.size'),
        queueHead: off(Q, 'queue.head'),
        queueTail: off(Q, 'queue.ptail'),
        queueSize: size(Q),
        reqQueue: off(R, 'recv.queue'),
        reqBuffer: off(R, 'recv.buffer'),
        reqLength: off(R, 'recv.length'),
        reqTag: off(R, 'recv.tag.tag'),
        reqMask: off(R, 'recv.tag.tag_mask'),
        reqSn: off(R, 'recv.tag.sn'),
        listNext: off(L, 'next'),
        listSize: size(L),
        rdescTagList: off(D, 'tag_list'),
        rdescLength: off(D, 'length'),
        rdescPayload: off(D, 'payload_offset'),
        rdescFlags: off(D, 'flags'),
        rdescSize: size(D),
        eagerFirstTotal: off(['ucp_eager_first_hdr_t'], 'total_len'),
        rtsSize: off(['ucp_rndv_rts_hdr_t'], 'size'),
      },
    };
  } catch (e) {
    if (e instanceof Missing) return { ok: false, missing: e.message };
    throw e;
  }
}
