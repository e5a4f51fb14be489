/**
 * Polls `fn` until it returns a truthy value and returns that value; throws
 * naming `what` when `timeoutMs` passes first. Tests wait for a condition with
 * it, never for a fixed time. The one polling helper of the test suite.
 */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  what = 'the condition',
  timeoutMs = 10_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
