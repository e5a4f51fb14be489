import { describe, expect, it } from 'vitest';
import { isolatedEnv } from '../realtime/helpers/isolation.js';
import { spawnGateway } from '../realtime/helpers/processes.js';

/**
 * GATEWAY_OPTIMIZE_FOR_SIZE (realtime/memory.ts, issue 16): a process running
 * the gateway tells V8 to favour memory over speed unless the setting says
 * false, and says so when it starts listening.
 */
const env = await isolatedEnv();

function listening(logs: string[]): Record<string, unknown> {
  const line = logs.find((l) => l.includes('"gateway listening"'));
  if (!line) throw new Error(`no start-up line in:\n${logs.join('\n')}`);
  return JSON.parse(line) as Record<string, unknown>;
}

describe('the gateway process and V8 memory (GATEWAY_OPTIMIZE_FOR_SIZE)', () => {
  it('favours memory by default, and keeps V8 defaults with false', async () => {
    const [byDefault, off] = await Promise.all([spawnGateway(env), spawnGateway({ ...env, GATEWAY_OPTIMIZE_FOR_SIZE: 'false' })]);
    try {
      expect(listening(byDefault.logs)).toMatchObject({ optimize_for_size: true });
      expect(listening(off.logs)).toMatchObject({ optimize_for_size: false });
    } finally {
      await Promise.all([byDefault.stop(), off.stop()]);
    }
  }, 60_000);
});
