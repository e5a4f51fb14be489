import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { join } from './helpers/client.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * Short-lived TURN credentials (coturn use-auth-secret, docs/board.md "Video
 * call"): each participant's welcome carries TURN credentials of their own
 * that verify with the shared secret and expire no later than their link.
 */
const SECRET = 'turn-secret-of-the-test-0123456789';
const STUN = { urls: 'stun:turn.example.com:3478' };
const gw = await startTestGateway({
  env: { ICE_SERVERS: JSON.stringify([STUN]), TURN_URLS: 'turn:turn.example.com:3478?transport=udp,turns:turn.example.com:5349', TURN_SECRET: SECRET, TURN_TTL_SECONDS: '3600' },
});

describe('TURN credentials in welcome', () => {
  it('gives each participant their own credentials that verify with the HMAC and expire no later than the link', async () => {
    const f = await lessonWithLinks(gw.deps.sql, { mode: 'full' });
    const before = Math.floor(Date.now() / 1000);
    const shortLink = await join(gw.wsUrl(await f.link('a', { ttl: 30 })));
    const longLink = await join(gw.wsUrl(await f.link('b', { role: 'teacher', ttl: 180 })));
    const after = Math.ceil(Date.now() / 1000);
    const seen: string[] = [];
    for (const [c, ttlSeconds] of [[shortLink, 30 * 60], [longLink, 3600]] as const) {
      const w = c.of('welcome')[0];
      expect(w.ice_servers[0]).toEqual(STUN); // static STUN stays
      const turn = w.ice_servers[1];
      expect(turn.urls).toEqual(['turn:turn.example.com:3478?transport=udp', 'turns:turn.example.com:5349']);
      const [expiry, person] = turn.username.split(':');
      expect(person).toBe(w.you.id);
      expect(turn.credential).toBe(createHmac('sha1', SECRET).update(turn.username).digest('base64'));
      // the link's lifetime, or TURN_TTL_SECONDS when the link lives longer
      expect(Number(expiry)).toBeGreaterThanOrEqual(before + ttlSeconds - 1);
      expect(Number(expiry)).toBeLessThanOrEqual(after + ttlSeconds);
      seen.push(turn.username, turn.credential);
    }
    expect(new Set(seen).size).toBe(4);
    await Promise.all([shortLink.close(), longLink.close()]);
  });

  it('gives none in board_only lessons, and TURN_URLS without TURN_SECRET stops the start', async () => {
    const f = await lessonWithLinks(gw.deps.sql, { mode: 'board_only' });
    const c = await join(gw.wsUrl(await f.link('a')));
    expect(c.of('welcome')[0].ice_servers).toBeUndefined();
    await c.close();
    expect(() => loadConfig({ TURN_URLS: 'turn:turn.example.com:3478' })).toThrow(ConfigError);
    expect(() => loadConfig({ TURN_SECRET: SECRET })).toThrow(/TURN_URLS and TURN_SECRET/);
    expect(() => loadConfig({ TURN_URLS: 'stun:x', TURN_SECRET: SECRET })).toThrow(/turn: or turns:/);
  });
});

describe('TURN credentials renewed over the socket', () => {
  it('sends fresh credentials at half the TTL while the person is in the lesson, and none once they are removed', async () => {
    const short = await startTestGateway({ env: { TURN_URLS: 'turn:turn.example.com:3478', TURN_SECRET: SECRET, TURN_TTL_SECONDS: '2' } });
    const f = await lessonWithLinks(short.deps.sql, { mode: 'full' });
    const teacher = await join(short.wsUrl(await f.link('t', { role: 'teacher' })));
    const student = await join(short.wsUrl(await f.link('s')));
    const first = student.of('welcome')[0].ice_servers[0];
    const expiryOf = (s: { username: string }) => Number(s.username.split(':')[0]);
    expect(expiryOf(first)).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 2);
    const renewed = await student.waitFor((m) => m.type === 'call.ice_servers', 'renewal', 5000);
    const fresh = renewed.ice_servers[0];
    expect(fresh.credential).toBe(createHmac('sha1', SECRET).update(fresh.username).digest('base64'));
    expect(expiryOf(fresh)).toBeGreaterThanOrEqual(expiryOf(first));
    expect(expiryOf(fresh)).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 2);
    // the teacher removes the student: the socket closes, and nothing renews what they hold
    teacher.send({ type: 'teacher.remove', participant_id: student.of('welcome')[0].you.id });
    await student.closed;
    const renewals = student.of('call.ice_servers').length;
    await teacher.waitFor((m) => m.type === 'call.ice_servers' && teacher.of('call.ice_servers').length >= 2, 'two renewals of the teacher', 5000);
    expect(student.of('call.ice_servers').length).toBe(renewals);
    await teacher.close();
  }, 20_000);
});
