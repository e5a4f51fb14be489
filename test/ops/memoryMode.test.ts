import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { isolatedEnv } from '../realtime/helpers/isolation.js';
import { spawnGateway } from '../realtime/helpers/processes.js';

/**
 * GATEWAY_OPTIMIZE_FOR_SIZE (realtime/memory.ts, issue 16): a process running
 * the gateway tells V8 to favour memory over speed unless the setting says
 * false, and says so when it starts listening. GATEWAY_HEAP_GROWING_PERCENT
 * (size mode off only) caps V8's heap growth instead.
 */
const env = await isolatedEnv();

function listening(logs: string[]): Record<string, unknown> {
  const line = logs.find((l) => l.includes('"gateway listening"'));
  if (!line) throw new Error(`no start-up line in:\n${logs.join('\n')}`);
  return JSON.parse(line) as Record<string, unknown>;
}

describe('the gateway process and V8 memory (GATEWAY_OPTIMIZE_FOR_SIZE)', () => {
  it('favours memory by default, keeps V8 defaults with false, and caps the heap growth when asked', async () => {
    const [byDefault, off, capped] = await Promise.all([
      spawnGateway(env),
      spawnGateway({ ...env, GATEWAY_OPTIMIZE_FOR_SIZE: 'false' }),
      spawnGateway({ ...env, GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '30' }),
    ]);
    try {
      expect(listening(byDefault.logs)).toMatchObject({ optimize_for_size: true });
      expect(listening(byDefault.logs)).not.toHaveProperty('heap_growing_percent');
      expect(listening(off.logs)).toMatchObject({ optimize_for_size: false });
      expect(listening(off.logs)).not.toHaveProperty('heap_growing_percent');
      expect(listening(capped.logs)).toMatchObject({ optimize_for_size: false, heap_growing_percent: 30 });
    } finally {
      await Promise.all([byDefault.stop(), off.stop(), capped.stop()]);
    }
  }, 60_000);

  it('refuses a heap growth cap with size mode on (its default), or out of range', () => {
    expect(() => loadConfig({ GATEWAY_HEAP_GROWING_PERCENT: '30' })).toThrow(/GATEWAY_HEAP_GROWING_PERCENT: set only with GATEWAY_OPTIMIZE_FOR_SIZE=false/);
    expect(() => loadConfig({ GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '5' })).toThrow(/GATEWAY_HEAP_GROWING_PERCENT/);
    expect(loadConfig({ GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '30' })).toMatchObject({ GATEWAY_HEAP_GROWING_PERCENT: 30 });
  });
});
