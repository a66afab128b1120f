// The preamble every command shares: its options parsed strictly, -h/--help, and a usage error
// that names what is wrong before the command's usage (MQD_E_USAGE, exit status 2).
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { mqdError } from '@mqd/model';
import type { Io } from './usage.js';

/** MQD_E_USAGE: `detail`, then the command's usage, on stderr; the exit status to return (2). */
export function usageError(io: Io, usage: string, detail: string): number {
  io.err(`${mqdError('MQD_E_USAGE', detail).message}\n${usage}`);
  return 2;
}

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

type Options = NonNullable<ParseArgsConfig['options']>;
type OptionValue<T> = T extends { readonly type: 'boolean' }
  ? T extends { readonly multiple: true }
    ? boolean[]
    : boolean
  : T extends { readonly multiple: true }
    ? string[]
    : string;
/** What commandArgs gives for `options` (none has a default: each is absent when not given). */
export type CommandValues<O extends Options> = { readonly [K in keyof O]?: OptionValue<O[K]> };

/**
 * `argv` parsed with `options` (plus -h/--help), strictly. A parse error is a usage error and
 * --help prints `usage`: either way the exit status to return comes back as a number; else the
 * parsed values.
 */
export function commandArgs<const O extends Options>(
  io: Io,
  usage: string,
  argv: string[],
  options: O,
): CommandValues<O> | number {
  let values: { readonly help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { ...options, ...HELP }, strict: true }));
  } catch (e) {
    return usageError(io, usage, (e as Error).message);
  }
  if (values.help === true) {
    io.out(usage);
    return 0;
  }
  return values as CommandValues<O>;
}
