import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { chooseCap, ConnectionCap, DESCRIPTOR_RESERVE, FALLBACK_MAX_CONNECTIONS, softOpenFilesLimit } from '../../realtime/admission/ConnectionCap.js';
import { gatewayMetrics } from '../../src/metrics/gateway.js';
import { createRegistry } from '../../src/metrics/registry.js';
import { join, TestClient } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

const registry = createRegistry();
const gw = await startTestGateway({ env: { GATEWAY_MAX_CONNECTIONS: '3' }, options: { metrics: gatewayMetrics(registry) } });
const { sql } = gw.deps;

/**
 * A handshake written by hand: the answer, and whether the server ended the connection after it
 * (within 500 ms) instead of keeping it alive.
 */
function rawUpgrade(token: string): Promise<{ status: number; headers: Record<string, string>; body: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(gw.port, '127.0.0.1');
    let got = '';
    let answer: { status: number; headers: Record<string, string>; body: string } | undefined;
    const done = (closed: boolean) => {
      clearTimeout(timer);
      s.destroy();
      if (answer) resolve({ ...answer, closed });
      else reject(new Error(`no complete answer: ${got}`));
    };
    const timer = setTimeout(() => done(false), 3000);
    s.on('connect', () =>
      s.write(
        `GET /ws?token=${token} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      ),
    );
    s.on('data', (d) => {
      got += d.toString('latin1');
      const at = got.indexOf('\r\n\r\n');
      if (answer || at < 0) return;
      const [statusLine, ...lines] = got.slice(0, at).split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const body = got.slice(at + 4);
      if (body.length < Number(headers['content-length'])) return;
      answer = { status: Number(statusLine.split(' ')[1]), headers, body };
      clearTimeout(timer);
      setTimeout(() => done(false), 500);
    });
    s.on('error', reject);
    s.on('end', () => done(true));
  });
}

const readyz = async () => {
  const res = await fetch(gw.httpUrl('/readyz'));
  return { status: res.status, body: await res.json() };
};
const refusedFull = async () => (await registry.getMetricsAsJSON()).find((f) => f.name === 'lessons_gateway_upgrades_refused_total')!.values.find((v) => v.labels.reason === 'full')?.value;
const until = async (what: string, pred: () => Promise<boolean>) => {
  const deadline = Date.now() + 5000;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('the connection cap (GATEWAY_MAX_CONNECTIONS)', () => {
  it('refuses the upgrade past the cap with 503 unavailable and Retry-After before the token is looked at, says /readyz 503 full, and admits again once a socket closes', async () => {
    const f = await lessonWithLinks(sql);
    const people = [await join(gw.wsUrl(await f.link('a'))), await join(gw.wsUrl(await f.link('b'))), await join(gw.wsUrl(await f.link('c')))];
    expect(await readyz()).toEqual({ status: 503, body: { ready: false, full: true } });

    // a token nobody issued: a node with room answers 401; a full one refuses before looking
    const lookups = gw.gateway.admission.lookupsMade;
    const refused = await rawUpgrade('not-a-token');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('2');
    // its descriptor is freed at once: no keep-alive on a full node
    expect(refused.closed).toBe(true);
    expect(JSON.parse(refused.body)).toEqual({ detail: { code: 'unavailable', message: expect.any(String) } });
    expect(gw.gateway.admission.lookupsMade).toBe(lookups);
    // a real participant is refused the same way (the ws client sees the 503)
    const fourth = new TestClient(gw.wsUrl(await f.link('d')));
    await expect(fourth.opened).rejects.toThrow(/503/);
    expect(await refusedFull()).toBe(2);

    await people[0].close();
    await until('/readyz 200', async () => (await readyz()).status === 200);
    expect((await readyz()).body).toMatchObject({ ready: true });
    const d = await join(gw.wsUrl(await f.link('d')));
    expect((await readyz()).status).toBe(503);

    const text = await registry.metrics();
    expect(text).toMatch(/lessons_gateway_connection_cap 3\n/);
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="full"} 2');
    await Promise.all([people[1], people[2], d].map((c) => c.close()));
  });

  it('gives back the slot of an upgrade refused after the cap (an unknown token: 401), so refusals never fill the node', async () => {
    await until('the sockets of the test before to close', async () => (await readyz()).status === 200);
    expect((await Promise.all([0, 1, 2, 3, 4].map((i) => rawUpgrade(`unknown-${i}`)))).map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    const f = await lessonWithLinks(sql);
    const people = [await join(gw.wsUrl(await f.link('a'))), await join(gw.wsUrl(await f.link('b'))), await join(gw.wsUrl(await f.link('c')))];
    expect((await rawUpgrade('x')).status).toBe(503);
    const text = await registry.metrics();
    expect(text).toContain('lessons_gateway_upgrades_refused_total{reason="unauthorized"} 5');
    await Promise.all(people.map((c) => c.close()));
  });
});

describe('the automatic cap (GATEWAY_MAX_CONNECTIONS=0)', () => {
  const limits = (soft: string, hard = soft) =>
    [
      'Limit                     Soft Limit           Hard Limit           Units     ',
      'Max cpu time              unlimited            unlimited            seconds   ',
      'Max processes             96365                96365                processes ',
      `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
      'Max locked memory         8388608              8388608              bytes     ',
      '',
    ].join('\n');

  it('reads the soft "Max open files" limit of /proc/self/limits', () => {
    expect(softOpenFilesLimit(limits('20000'))).toBe(20_000);
    expect(softOpenFilesLimit(limits('1024', '524288'))).toBe(1024);
    expect(softOpenFilesLimit(limits('unlimited'))).toBeUndefined();
    expect(softOpenFilesLimit('Limit Soft Limit\n')).toBeUndefined();
  });

  it('is the soft descriptor limit less the Postgres pools and the reserve; a set value wins; without /proc or a limit it is 10,000', () => {
    expect(DESCRIPTOR_RESERVE).toBe(64);
    expect(chooseCap(0, 13, limits('20000'))).toEqual({ max: 20_000 - 13 - 64, from: 'descriptors' });
    expect(chooseCap(0, 13, limits('1024', '524288'))).toEqual({ max: 1024 - 13 - 64, from: 'descriptors' });
    expect(chooseCap(500, 13, limits('20000'))).toEqual({ max: 500, from: 'setting' });
    expect(chooseCap(0, 13, undefined)).toEqual({ max: FALLBACK_MAX_CONNECTIONS, from: 'fallback' });
    expect(FALLBACK_MAX_CONNECTIONS).toBe(10_000);
    expect(chooseCap(0, 13, limits('unlimited'))).toEqual({ max: 10_000, from: 'fallback' });
    // a limit too small for the reserve still lets one participant in
    expect(chooseCap(0, 13, limits('50'))).toEqual({ max: 1, from: 'descriptors' });
  });

  it('counts slots taken and given back, and never below zero', () => {
    const cap = new ConnectionCap(2);
    expect([cap.take(), cap.take(), cap.take()]).toEqual([true, true, false]);
    expect(cap.full).toBe(true);
    cap.release();
    expect([cap.full, cap.held]).toEqual([false, 1]);
    cap.release();
    cap.release();
    expect(cap.held).toBe(0);
  });
});
