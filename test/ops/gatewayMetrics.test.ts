import { describe, expect, it } from 'vitest';
import { gatewayMetrics } from '../../src/metrics/gateway.js';
import { boundedLabel, createRegistry } from '../../src/metrics/registry.js';
import { frameType } from '../../realtime/lesson/Lesson.js';
import { CloseCode } from '../../realtime/protocol/closeCodes.js';

/** The typed object realtime/ reports into: what it records and how it bounds labels. */
describe('gatewayMetrics', () => {
  it('records joins, messages, fan-outs, closes and store calls; reads its gauges from the source on scrape', async () => {
    const registry = createRegistry();
    let t = 1_000_000;
    const m = gatewayMetrics(registry, () => t);
    let connections = 3;
    m.setSource({ connections: () => connections, lessonsOpen: () => 2, sessionsRunning: () => 1 });
    m.joined(40);
    m.joined(60);
    m.messageIn('cursor');
    m.messageOut('cursor', 5);
    m.fanOut(2);
    m.closed(1000);
    m.closed(4409);
    m.closed(3999);
    m.call('redis', 'presence.join', 1.5);
    m.call('postgres', 'meter.flush', 12);
    t += 7_000;
    connections = 4;
    const json = await registry.getMetricsAsJSON();
    const get = (name: string) => json.find((f) => f.name === name)!.values;
    expect(get('lessons_gateway_connections')[0].value).toBe(4);
    expect(get('lessons_gateway_lessons_open')[0].value).toBe(2);
    expect(get('lessons_gateway_sessions_running')[0].value).toBe(1);
    expect(get('lessons_gateway_joins_total')[0].value).toBe(2);
    expect(get('lessons_gateway_join_duration_seconds').find((v) => v.metricName?.endsWith('_sum'))!.value).toBeCloseTo(0.1);
    expect(get('lessons_gateway_messages_in_total')).toEqual([expect.objectContaining({ labels: { type: 'cursor' }, value: 1 })]);
    expect(get('lessons_gateway_messages_out_total')).toEqual([expect.objectContaining({ labels: { type: 'cursor' }, value: 5 })]);
    expect(get('lessons_gateway_closes_total').map((v) => [v.labels.code, v.value])).toEqual([['1000', 1], ['4409', 1], ['other', 1]]);
    expect(get('lessons_gateway_store_call_duration_seconds').filter((v) => v.metricName?.endsWith('_count')).map((v) => v.labels)).toEqual([
      { store: 'redis', op: 'presence.join' },
      { store: 'postgres', op: 'meter.flush' },
    ]);
    // no flush yet: the lag counts from start; a flush resets it
    expect(get('lessons_gateway_meter_flush_lag_seconds')[0].value).toBe(7);
    m.meterFlushed();
    t += 1500;
    expect((await registry.getMetricsAsJSON()).find((f) => f.name === 'lessons_gateway_meter_flush_lag_seconds')!.values[0].value).toBe(1.5);
  });

  it("keeps the service's own close codes on their own labels whatever codes clients close with: any other code is `other`", async () => {
    const registry = createRegistry();
    const m = gatewayMetrics(registry);
    // a client trying to crowd out the label's values with codes of its own choosing
    for (let c = 4000; c < 4100; c++) if (!(Object.values(CloseCode) as number[]).includes(c)) m.closed(c);
    for (const c of Object.values(CloseCode)) m.closed(c);
    m.closed(1000);
    const values = (await registry.getMetricsAsJSON()).find((f) => f.name === 'lessons_gateway_closes_total')!.values;
    const by = new Map(values.map((v) => [String(v.labels.code), v.value]));
    for (const c of Object.values(CloseCode)) expect(by.get(String(c)), String(c)).toBe(1);
    expect(by.get('1000')).toBe(1);
    expect(by.get('other')).toBe(100 - Object.values(CloseCode).filter((c) => c >= 4000 && c < 4100).length);
    expect(by.size).toBe(Object.values(CloseCode).length + 2);
  });

  it('counts refused upgrades by reason (every known reason exported at 0 from the start) and exports the connection cap', async () => {
    const registry = createRegistry();
    const m = gatewayMetrics(registry);
    m.connectionCap(19_923);
    m.upgradeRefused('full');
    m.upgradeRefused('full');
    m.upgradeRefused('removed');
    m.upgradeRefused('Not A Reason');
    const text = await registry.metrics();
    expect(text).toContain('lessons_gateway_connection_cap 19923');
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="full"} 2');
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="per_ip"} 0');
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="removed"} 1');
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="other"} 1');
  });

  it('counts the rows of one lesson left out of a batched write, by what they were (each exported at 0 from the start)', async () => {
    const registry = createRegistry();
    const m = gatewayMetrics(registry);
    m.writeRefused('participant.joined');
    const text = await registry.metrics();
    expect(text).toContain('lessons_gateway_writes_refused_total{what="participant.joined"} 1');
    for (const what of ['presence marks', 'meter charge', 'meter snapshot']) expect(text).toContain(`lessons_gateway_writes_refused_total{what="${what}"} 0`);
  });

  it('bounds open label sets: message types past the limit, and values that look like ids or tokens, become "other"', () => {
    const label = boundedLabel(3);
    expect(['a', 'b', 'a', 'c', 'd', 'b'].map(label)).toEqual(['a', 'b', 'a', 'c', 'other', 'b']);
    const fresh = boundedLabel(10);
    expect(fresh('has space')).toBe('other');
    expect(fresh('x'.repeat(33))).toBe('other');
    expect(fresh('Xk3Pq9TokenLike')).toBe('other');
    expect(fresh('42')).toBe('other');
    expect(fresh('{"json":1}')).toBe('other');
  });

  it('reads the type of an outgoing frame from its prefix (messages out by type), anything else is "other"', () => {
    expect(frameType('{"type":"cursor","from":"p","x":1,"y":2}')).toBe('cursor');
    expect(frameType('{"type":"cursor","from":"q","x":3,"y":4}')).toBe('cursor');
    expect(frameType('{"type":"board.ops","ops":[]}')).toBe('board.ops');
    expect(frameType('{"type":"cursorx"}')).toBe('cursorx');
    expect(frameType('[1,2]')).toBe('other');
    expect(frameType(`{"type":"${'x'.repeat(40)}"}`)).toBe('other');
  });

  it('keeps per-message counts and fan-out times in plain numbers, handed to the exposition on each scrape', async () => {
    const registry = createRegistry();
    const m = gatewayMetrics(registry);
    for (let i = 0; i < 1000; i++) {
      m.messageIn('cursor');
      m.messageOut('cursor', 3);
      m.fanOut(i % 2 === 0 ? 0.2 : 3);
    }
    const text = await registry.metrics();
    expect(text).toContain('lessons_gateway_messages_in_total{type="cursor"} 1000');
    expect(text).toContain('lessons_gateway_messages_out_total{type="cursor"} 3000');
    expect(text).toContain('# TYPE lessons_gateway_fanout_duration_seconds histogram');
    expect(text).toContain('lessons_gateway_fanout_duration_seconds_bucket{le="0.0005"} 500');
    expect(text).toContain('lessons_gateway_fanout_duration_seconds_bucket{le="0.005"} 1000');
    expect(text).toContain('lessons_gateway_fanout_duration_seconds_bucket{le="+Inf"} 1000');
    expect(text).toContain('lessons_gateway_fanout_duration_seconds_count 1000');
    m.messageIn('cursor');
    expect(await registry.metrics()).toContain('lessons_gateway_messages_in_total{type="cursor"} 1001');
  });
});
