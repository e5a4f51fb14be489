import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { BURST_QUIET_SAMPLES, SizeModeBursts } from '../../realtime/memory.js';
import { makeDeps } from '../helpers/deps.js';
import { eventually } from '../helpers/wait.js';
import { join } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { spawnGateway } from '../realtime/helpers/processes.js';

/**
 * GATEWAY_OPTIMIZE_FOR_SIZE (realtime/memory.ts): a process running
 * the gateway tells V8 to favour memory over speed unless the setting says
 * false, and says so when it starts listening; during a join burst
 * (GATEWAY_SIZE_MODE_BURST_JOINS) size mode is suspended and comes back after
 * 2 quiet seconds. GATEWAY_HEAP_GROWING_PERCENT (size mode off only) caps V8's
 * heap growth instead.
 */
const env = await isolatedEnv();
const deps = makeDeps({ env });
afterAll(() => deps.close());

function logLine(logs: string[], msg: string): Record<string, unknown> | undefined {
  const line = logs.find((l) => l.includes(`"msg":"${msg}"`));
  return line ? (JSON.parse(line) as Record<string, unknown>) : undefined;
}

function listening(logs: string[]): Record<string, unknown> {
  const line = logLine(logs, 'gateway listening');
  if (!line) throw new Error(`no start-up line in:\n${logs.join('\n')}`);
  return line;
}

describe('the gateway process and V8 memory (GATEWAY_OPTIMIZE_FOR_SIZE)', () => {
  it('favours memory by default, keeps V8 defaults with false, and caps the heap growth when asked', async () => {
    const [byDefault, off, capped] = await Promise.all([
      spawnGateway(env),
      spawnGateway({ ...env, GATEWAY_OPTIMIZE_FOR_SIZE: 'false' }),
      spawnGateway({ ...env, GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '30' }),
    ]);
    try {
      expect(listening(byDefault.logs)).toMatchObject({ optimize_for_size: true, size_mode_burst_joins: 100 });
      expect(listening(byDefault.logs)).not.toHaveProperty('heap_growing_percent');
      expect(listening(off.logs)).toMatchObject({ optimize_for_size: false });
      expect(listening(off.logs)).not.toHaveProperty('heap_growing_percent');
      expect(listening(off.logs)).not.toHaveProperty('size_mode_burst_joins');
      expect(listening(capped.logs)).toMatchObject({ optimize_for_size: false, heap_growing_percent: 30 });
    } finally {
      await Promise.all([byDefault.stop(), off.stop(), capped.stop()]);
    }
  }, 60_000);

  it('suspends size mode while joins arrive at the burst rate, and resumes it when they stop (a real process)', async () => {
    // 5 joins a second, sampled every 200 ms: one arrival in a sample is a burst
    const gw = await spawnGateway({ ...env, GATEWAY_SIZE_MODE_BURST_JOINS: '5' });
    try {
      expect(listening(gw.logs)).toMatchObject({ optimize_for_size: true, size_mode_burst_joins: 5 });
      expect(logLine(gw.logs, 'size mode suspended: a join burst')).toBeUndefined();
      const f = await lessonWithLinks(deps.sql);
      const a = await join(gw.wsUrl(await f.link('a', { name: 'Ann' })));
      await eventually(async () => logLine(gw.logs, 'size mode suspended: a join burst') !== undefined, 'size mode suspended', 5_000);
      expect(logLine(gw.logs, 'size mode suspended: a join burst')).toMatchObject({ joins_per_second: 5 });
      // nobody else arrives: back after 2 s, while Ann stays (the suspension follows arrivals, not who is held)
      await eventually(async () => logLine(gw.logs, 'size mode resumed') !== undefined, 'size mode resumed', 10_000);
      await a.close();
    } finally {
      await gw.stop();
    }
  }, 60_000);

  it('refuses a heap growth cap with size mode on (its default), a burst rate with it off, or either out of range', () => {
    expect(() => loadConfig({ GATEWAY_HEAP_GROWING_PERCENT: '30' })).toThrow(/GATEWAY_HEAP_GROWING_PERCENT: set only with GATEWAY_OPTIMIZE_FOR_SIZE=false/);
    expect(() => loadConfig({ GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '5' })).toThrow(/GATEWAY_HEAP_GROWING_PERCENT/);
    expect(loadConfig({ GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_HEAP_GROWING_PERCENT: '30' })).toMatchObject({ GATEWAY_HEAP_GROWING_PERCENT: 30 });
    expect(() => loadConfig({ GATEWAY_OPTIMIZE_FOR_SIZE: 'false', GATEWAY_SIZE_MODE_BURST_JOINS: '100' })).toThrow(/GATEWAY_SIZE_MODE_BURST_JOINS: set only with GATEWAY_OPTIMIZE_FOR_SIZE on/);
    expect(() => loadConfig({ GATEWAY_SIZE_MODE_BURST_JOINS: '-1' })).toThrow(/GATEWAY_SIZE_MODE_BURST_JOINS/);
    expect(() => loadConfig({ GATEWAY_SIZE_MODE_BURST_JOINS: 'many' })).toThrow(/GATEWAY_SIZE_MODE_BURST_JOINS/);
    expect(loadConfig({ GATEWAY_SIZE_MODE_BURST_JOINS: '0' })).toMatchObject({ GATEWAY_SIZE_MODE_BURST_JOINS: 0 });
  });
});

describe('SizeModeBursts: when size mode is suspended and resumed', () => {
  function bursts(joinsPerSecond: number) {
    let arrivals = 0;
    const flags: string[] = [];
    const b = new SizeModeBursts({ joinsPerSecond, arrivals: () => arrivals, setFlags: (f) => flags.push(f) });
    return { b, flags, arrive: (n: number) => (arrivals += n) };
  }

  it('suspends at the burst rate (100/s: 20 arrivals in a 200 ms sample), not below it', () => {
    const t = bursts(100);
    t.arrive(19);
    t.b.sample();
    expect(t.flags).toEqual([]);
    t.arrive(20);
    t.b.sample();
    expect(t.flags).toEqual(['--no-optimize-for-size']);
    expect(t.b.suspended).toBe(true);
    // a burst that goes on sets nothing again
    t.arrive(500);
    t.b.sample();
    expect(t.flags).toEqual(['--no-optimize-for-size']);
  });

  it('resumes after 2 s of samples below the rate; a join in between restarts the count', () => {
    const t = bursts(100);
    t.arrive(50);
    t.b.sample();
    for (let i = 0; i < BURST_QUIET_SAMPLES - 1; i++) {
      t.arrive(5); // below the rate: quiet
      t.b.sample();
    }
    expect(t.b.suspended).toBe(true);
    t.arrive(30); // a burst again: the quiet count starts over
    t.b.sample();
    for (let i = 0; i < BURST_QUIET_SAMPLES - 1; i++) t.b.sample();
    expect(t.b.suspended).toBe(true);
    t.b.sample();
    expect(t.b.suspended).toBe(false);
    expect(t.flags).toEqual(['--no-optimize-for-size', '--optimize-for-size']);
    // quiet goes on: nothing more
    for (let i = 0; i < 3 * BURST_QUIET_SAMPLES; i++) t.b.sample();
    expect(t.flags).toHaveLength(2);
  });

  it('counts arrivals from its start, not from the process start', () => {
    let arrivals = 10_000;
    const flags: string[] = [];
    const b = new SizeModeBursts({ joinsPerSecond: 100, arrivals: () => arrivals, setFlags: (f) => flags.push(f) });
    arrivals += 1;
    b.sample();
    expect(flags).toEqual([]);
  });
});
