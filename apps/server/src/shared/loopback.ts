// Shared by the aggregator (refusing plain HTTP off loopback) and the agent (refusing to send
// its token over plain HTTP off loopback), so the two cannot disagree on what is loopback.

/** 127.0.0.0/8, ::1 and localhost: addresses no other machine can reach. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
