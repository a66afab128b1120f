// A rank's message queues where Open MPI's DLL is blind: under the ucx PML, Open MPI keeps no
// request lists (its DLL walks ob1's, which stay empty) and the state is UCX's. In the stop, with
// the same memory service and page cache as the DLL's walk, this reads the worker's posted
// receives (the wildcard queue and every hash bucket, put back in UCX's matching order by each
// request's sequence number) and its unexpected messages (the `all` list, in arrival order, which
// is the order a receive matches them in), and decodes each UCX tag into MPI's communicator,
// source and tag (tag.ts). Sends are not kept by UCX in any list: merge.ts takes the one blocking
// send the MPI call names. Nothing here writes to the target or calls into it.
import { type MqdError, mqdError } from '@mqd/model';
import type { MappedModule, ProcessImage } from '../inferior/process-image.js';
import type { RankMemory } from '../mqs/libraries/library.js';
import { type UcxLayout, ucxLayout } from './layout.js';
import { decodeRecvTag, decodeSendTag } from './tag.js';

/** One queue entry as UCX holds it, in MPI terms. */
export interface UcxEntry {
  /** The communicator's id as Open MPI's DLL lists it. */
  readonly comm: string;
  /** Rank in the communicator; null = MPI_ANY_SOURCE. */
  readonly source: number | null;
  /** null = MPI_ANY_TAG. */
  readonly tag: number | null;
  /** Bytes; null when UCX does not hold it for this entry. */
  readonly length: number | null;
  /** The receive buffer (posted receives); 0 for an unexpected message. */
  readonly buffer: bigint;
  /** How UCX holds it ("UCX eager", "UCX rendezvous", "UCX request 0x..."). */
  readonly detail: string;
}

/** What the UCX read of one rank gave. */
export type UcxRead =
  | {
      readonly kind: 'ucx';
      /** The libucp.so read. */
      readonly library: string;
      /** Posted receives in matching order (by UCX sequence number). */
      readonly receives: readonly UcxEntry[];
      /** Unexpected messages in arrival (matching) order. */
      readonly unexpected: readonly UcxEntry[];
      /** What could not be read on this rank and why (tag offload, a count that disagrees). */
      readonly limits: readonly MqdError[];
    }
  | { readonly kind: 'error'; readonly library: string | null; readonly error: MqdError };

/** UCP_TAG_MATCH_HASH_SIZE (1021) rounded up to a power of two, as tag_match.c allocates both hashes. */
export const UCX_HASH_BUCKETS = 1024;
/** Most entries read from one rank's UCX queues (a corrupt or cyclic list stops here). */
export const MAX_UCX_ENTRIES = 1_000_000;
/** ucp_recv_desc_t flags (src/ucp/core/ucp_request.h, 1.x). */
const FLAG_EAGER = 1 << 1;
const FLAG_EAGER_ONLY = 1 << 2;
const FLAG_EAGER_SYNC = 1 << 3;
const FLAG_RNDV = 1 << 6;
/** The MCA component name's offset in mca_base_component_t (MCA 2.1.0: three ints, char[32], three ints). */
const COMPONENT_NAME_OFFSET = 56;
const COMPONENT_NAME_BYTES = 64;

const LIBUCP = /\/libucp\.so(\.\d+)*$/;
const hex = (a: bigint) => `0x${a.toString(16)}`;

class ReadFailed extends Error {}

/** The name of the PML Open MPI selected in this process; null when it cannot be read (or is not Open MPI). */
export function selectedPml(image: Pick<ProcessImage, 'findSymbol'>, mem: RankMemory): string | null {
  const sym = image.findSymbol('mca_pml_base_selected_component');
  if (!sym) return null;
  const version = mem.offsetOf('mca_pml_base_component_t', 'pmlm_version');
  const name = mem.offsetOf('mca_base_component_t', 'mca_component_name');
  const at = sym.address + BigInt(Math.max(0, version) + (name >= 0 ? name : COMPONENT_NAME_OFFSET));
  const b = mem.bytes(at, COMPONENT_NAME_BYTES);
  if (!b) return null;
  const end = b.indexOf(0);
  return end <= 0 ? null : Buffer.from(b.subarray(0, end)).toString('latin1');
}

/**
 * The rank's UCX queues when its Open MPI runs the ucx PML; null when it runs another PML (or
 * is not Open MPI). Runs in the stop.
 */
export function readUcx(image: ProcessImage, mem: RankMemory, maxEntries = MAX_UCX_ENTRIES): UcxRead | null {
  if (selectedPml(image, mem) !== 'ucx') return null;
  const ucp = image.modules.find((m) => LIBUCP.test(m.path)) ?? null;
  const library = ucp?.path ?? null;
  const fail = (code: 'MQD_E_UCX_UNSUPPORTED' | 'MQD_E_UCX_READ', detail: string): UcxRead => ({
    kind: 'error',
    library,
    error: mqdError(code, detail.startsWith('pid ') ? detail : `pid ${image.pid}: ${detail}`),
  });
  const pml = image.findSymbol('ompi_pml_ucx');
  if (!pml)
    return fail('MQD_E_UCX_UNSUPPORTED', 'the ucx PML is selected but its module ompi_pml_ucx is not found');
  const workerOff = fieldIn(pml.module, 'mca_pml_ucx_module_t', 'ucp_worker');
  if (workerOff < 0)
    return fail(
      'MQD_E_UCX_UNSUPPORTED',
      `${pml.module.path} has no debug info for mca_pml_ucx_module_t.ucp_worker`,
    );
  if (!ucp) return fail('MQD_E_UCX_UNSUPPORTED', 'the ucx PML is selected but no libucp.so is mapped');
  const lay = ucxLayout(ucp.file);
  if (!lay.ok)
    return fail('MQD_E_UCX_UNSUPPORTED', `${ucp.path}: ${lay.missing} is missing from its debug info`);
  const worker = mem.u64(pml.address + BigInt(workerOff));
  if (worker === null) return fail('MQD_E_UCX_READ', `ompi_pml_ucx at ${hex(pml.address)} is unreadable`);
  if (worker === 0n)
    return fail('MQD_E_UCX_READ', 'the ucx PML has no worker yet (MPI_Init has not finished)');
  const q = readUcxQueues(mem, lay.layout, worker, image.pid, maxEntries);
  return 'error' in q ? fail('MQD_E_UCX_READ', q.error) : { kind: 'ucx', library: ucp.path, ...q };
}

/**
 * The worker's queues at `worker` under `layout` (the walk itself, apart from finding the worker
 * and its layout); `error` says where a list could not be followed.
 */
export function readUcxQueues(
  mem: Pick<RankMemory, 'bytes' | 'readInto' | 'u64' | 'i32'>,
  layout: UcxLayout,
  worker: bigint,
  pid: number,
  maxEntries = MAX_UCX_ENTRIES,
): { receives: UcxEntry[]; unexpected: UcxEntry[]; limits: MqdError[] } | { error: string } {
  try {
    const limits: MqdError[] = [];
    const receives = readExpected(mem, layout, worker, maxEntries, limits, pid);
    const unexpected = readUnexpected(mem, layout, worker, maxEntries);
    return { receives, unexpected, limits };
  } catch (e) {
    if (e instanceof ReadFailed) return { error: `pid ${pid}: ${e.message}` };
    throw e;
  }
}

type WalkMemory = Pick<RankMemory, 'bytes' | 'readInto' | 'u64' | 'i32'>;

/** The offset of `type.field` in a module's own DWARF (-1: no such type, field or DWARF). */
function fieldIn(m: MappedModule, type: string, field: string): number {
  if (!m.file.hasDwarf()) return -1;
  const t = m.file.findType(type);
  return t ? m.file.fieldOffset(t, field) : -1;
}

function need<T>(v: T | null, what: string): T {
  if (v === null) throw new ReadFailed(`${what} is unreadable`);
  return v;
}

/** The posted receives: the wildcard queue and every hash bucket, merged by sequence number. */
function readExpected(
  mem: WalkMemory,
  L: UcxLayout,
  worker: bigint,
  maxEntries: number,
  limits: MqdError[],
  pid: number,
): UcxEntry[] {
  const found: { sn: bigint; entry: UcxEntry }[] = [];
  const span = Math.max(L.reqQueue, L.reqBuffer, L.reqLength, L.reqTag, L.reqMask, L.reqSn) + 8;
  const req = new Uint8Array(span);
  const rv = new DataView(req.buffer);
  const walk = (queueAt: bigint, head: bigint, tail: bigint) => {
    // Empty: the tail points at the head field itself. Otherwise the last element is the one the
    // tail points at (its `next` is stale, not NULL: UCX nulls it only while it searches).
    if (tail === queueAt + BigInt(L.queueHead)) return;
    let elem = head;
    for (;;) {
      if (elem === 0n)
        throw new ReadFailed(`a UCX expected queue at ${hex(queueAt)} ends in NULL before its tail`);
      if (found.length >= maxEntries)
        throw new ReadFailed(`more than ${maxEntries} posted receives (a corrupt or cyclic queue?)`);
      const r = elem - BigInt(L.reqQueue);
      if (!mem.readInto(r, req)) throw new ReadFailed(`the UCX request at ${hex(r)} is unreadable`);
      const fields = decodeRecvTag(rv.getBigUint64(L.reqTag, true), rv.getBigUint64(L.reqMask, true));
      const length = rv.getBigUint64(L.reqLength, true);
      found.push({
        sn: rv.getBigUint64(L.reqSn, true),
        entry: {
          ...fields,
          length: length > BigInt(Number.MAX_SAFE_INTEGER) ? null : Number(length),
          buffer: rv.getBigUint64(L.reqBuffer, true),
          detail: `UCX request ${hex(r)}`,
        },
      });
      if (elem === tail) return;
      elem = need(mem.u64(elem), `the UCX queue element at ${hex(elem)}`);
    }
  };
  const wild = worker + BigInt(L.wildcard);
  walk(
    wild,
    need(mem.u64(wild + BigInt(L.queueHead)), 'the wildcard queue'),
    need(mem.u64(wild + BigInt(L.queueTail)), 'the wildcard queue'),
  );
  const hash = need(mem.u64(worker + BigInt(L.hash)), 'the expected hash');
  if (hash !== 0n) {
    const all = need(mem.bytes(hash, UCX_HASH_BUCKETS * L.queueSize), `the expected hash at ${hex(hash)}`);
    const hv = new DataView(all.buffer, all.byteOffset, all.byteLength);
    for (let i = 0; i < UCX_HASH_BUCKETS; i++) {
      const at = i * L.queueSize;
      walk(
        hash + BigInt(at),
        hv.getBigUint64(at + L.queueHead, true),
        hv.getBigUint64(at + L.queueTail, true),
      );
    }
  }
  found.sort((a, b) => (a.sn < b.sn ? -1 : a.sn > b.sn ? 1 : 0));
  const iface = mem.u64(worker + BigInt(L.offloadIface));
  const offloadIfaces = mem.i32(worker + BigInt(L.offloadHashSize));
  const counted = mem.i32(worker + BigInt(L.swAllCount));
  if ((iface !== null && iface !== 0n) || (offloadIfaces !== null && offloadIfaces > 0)) {
    limits.push(
      mqdError(
        'MQD_E_UCX_TAG_OFFLOAD',
        `pid ${pid}: the worker has tag-matching offload active; ${found.length} posted receives are in the software queue, others may be on the network card`,
      ),
    );
  } else if (counted !== null && counted >>> 0 !== found.length) {
    limits.push(
      mqdError(
        'MQD_E_UCX_READ',
        `pid ${pid}: ${found.length} posted receives were found, UCX counts ${counted >>> 0} (the rank was stopped while it changed its queues)`,
      ),
    );
  }
  return found.map((f) => f.entry);
}

/** The unexpected messages, in the order they arrived. */
function readUnexpected(mem: WalkMemory, L: UcxLayout, worker: bigint, maxEntries: number): UcxEntry[] {
  const out: UcxEntry[] = [];
  const head = worker + BigInt(L.unexpectedAll);
  // The `all` list links tag_list[1] (UCP_RDESC_ALL_LIST) of each descriptor.
  const linkAt = BigInt(L.rdescTagList + L.listSize);
  const span = L.rdescSize + Math.max(8, L.eagerFirstTotal + 8, L.rtsSize + 8);
  const buf = new Uint8Array(span);
  const v = new DataView(buf.buffer);
  let link = need(mem.u64(head + BigInt(L.listNext)), 'the unexpected list');
  while (link !== head) {
    if (link === 0n) throw new ReadFailed('the UCX unexpected list ends in NULL');
    if (out.length >= maxEntries)
      throw new ReadFailed(`more than ${maxEntries} unexpected messages (a corrupt or cyclic list?)`);
    const rdesc = link - linkAt;
    if (!mem.readInto(rdesc, buf))
      throw new ReadFailed(`the UCX receive descriptor at ${hex(rdesc)} is unreadable`);
    const flags = v.getUint16(L.rdescFlags, true);
    const hdr = L.rdescSize;
    let length: bigint | null = null;
    let detail = 'UCX eager';
    if (flags & FLAG_RNDV) {
      length = v.getBigUint64(hdr + L.rtsSize, true);
      detail = 'UCX rendezvous';
    } else if (flags & FLAG_EAGER_ONLY) {
      length = BigInt(v.getUint32(L.rdescLength, true) - v.getUint32(L.rdescPayload, true));
    } else if (flags & FLAG_EAGER) {
      length = v.getBigUint64(hdr + L.eagerFirstTotal, true);
    }
    if (flags & FLAG_EAGER_SYNC) detail = 'UCX eager, synchronous';
    out.push({
      ...decodeSendTag(v.getBigUint64(hdr, true)),
      length:
        length === null || length < 0n || length > BigInt(Number.MAX_SAFE_INTEGER) ? null : Number(length),
      buffer: 0n,
      detail,
    });
    link = need(mem.u64(link + BigInt(L.listNext)), `the unexpected list link at ${hex(link)}`);
  }
  return out;
}
