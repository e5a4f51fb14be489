import type { Deps } from '../deps.js';

/** The webhook dispatcher (placeholder until the webhooks issue lands). */
export async function startDispatcher(_deps: Deps): Promise<{ close: () => Promise<void> }> {
  return { close: async () => {} };
}
