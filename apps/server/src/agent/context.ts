// What every request handler of the agent gets from its connection (AgentContext): who it is,
// what it may read, how to answer, and where failures are recorded for the next status.
import {
  clipText,
  type ErrorCode,
  isErrorCode,
  MAX_MESSAGE_CHARS,
  type MqdError,
  MqdException,
  mqdError,
} from '@mqd/model';
import type { AgentMessage, RequestMethod, WireError } from '../protocol/agent-protocol.js';
import type { AgentOptions } from './options.js';

export interface AgentContext {
  readonly opts: AgentOptions;
  readonly host: string;
  readonly agentId: string;
  /** The directories whose core files this agent may open (AgentOptions.coreDirs). */
  readonly coreDirs: readonly string[];
  readonly log: (line: string) => void;
  /** Requests at work, by id: the keepalives name them, a disconnect aborts them. */
  readonly active: Map<number, AbortController>;
  /** The aggregator's per-message limit, from its welcome. */
  maxBytes(): number;
  /** Sends a message if connected and within the limit; false when it was not sent. */
  send(msg: AgentMessage | Buffer): boolean;
  /** Records a failure as the next status's lastError, and returns it coded and clipped. */
  failed(e: unknown): MqdError;
}

/** A failure as the wire carries it: coded, its message within the spec's limit. */
export function toMqdError(e: unknown, fallback: ErrorCode): MqdError {
  const m =
    e instanceof MqdException ? e.error : mqdError(fallback, e instanceof Error ? e.message : String(e));
  return { code: m.code, message: clipText(m.message, MAX_MESSAGE_CHARS) };
}

/** An error as a reply carries it: a code of ours (else MQD_E_INTERNAL), the message within its limit. */
export function wireErrorOf(e: { readonly code: string; readonly message: string }): WireError {
  return isErrorCode(e.code)
    ? { code: e.code, message: clipText(e.message, MAX_MESSAGE_CHARS) }
    : toMqdError(new Error(e.message), 'MQD_E_INTERNAL');
}

/** Answers request `id` of `method` with an error. */
export function refuse(ctx: AgentContext, id: number, method: RequestMethod, error: WireError): void {
  ctx.send({
    type: 'reply',
    id,
    method,
    ok: false,
    error: { code: error.code, message: clipText(error.message, MAX_MESSAGE_CHARS) },
  });
}

/** Runs `f` with request `id` listed as active (and abortable), unlisted when it ends. */
export async function whileActive<T>(
  ctx: AgentContext,
  id: number,
  f: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const ac = new AbortController();
  ctx.active.set(id, ac);
  try {
    return await f(ac.signal);
  } finally {
    ctx.active.delete(id);
  }
}
