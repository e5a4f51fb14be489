import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveLinkToken, type ResolvedLink } from '../../src/domain/links.js';
import { readMeterSeeds } from '../../src/metering/meters.js';
import type { Redis } from '../../src/redis.js';
import type { GatewayFeature } from '../../realtime/features/api.js';
import { boardFeature } from '../../realtime/features/board/feature.js';
import { callFeature } from '../../realtime/features/call/feature.js';
import { MediaStates } from '../../realtime/features/call/media.js';
import { chatFeature } from '../../realtime/features/chat/feature.js';
import { BoardService } from '../../realtime/features/board/service.js';
import { rect } from '../board/factories.js';
import { throughReads } from '../board/helpers.js';
import { Gateway } from '../../realtime/Gateway.js';
import { gatewayParts } from '../../realtime/parts.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import type { Presence } from '../../realtime/presence/Presence.js';
import { gatewayTiming } from '../../realtime/timing.js';
import { makeDeps, ManualClock } from '../helpers/deps.js';
import { lessonWithLinks } from './helpers/fixtures.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { FakeSocket, holdingRegistrationOf, opener, recorderFeature, relaysBetweenTwoNodes } from './helpers/plainSockets.js';

/**
 * The gateway core without uWS (plain socket objects, a clock the test moves)
 * on the production parts (realtime/parts.ts gatewayParts), for what lives in
 * the stores themselves: the board's operations in Postgres and its feed's
 * seq, the chat history in Redis, the lesson channel on Redis pub/sub. The
 * core's own behaviour runs without Postgres or Redis in gateway.unit.test.ts.
 */
const env = await isolatedEnv();
const clock = new ManualClock();
const deps = makeDeps({ env, clock });
const timing = gatewayTiming(deps.config);
let redis: Redis;
let presence: Presence;

beforeAll(() => {
  redis = deps.redis.duplicate();
  presence = new RedisPresence(redis, { ...timing, loadSeed: async (id) => (await readMeterSeeds(deps.readSql, [id]))[0] });
});
afterAll(async () => {
  redis.disconnect();
  await deps.close();
});

async function newGateway(nodeId: string, features: GatewayFeature[] = [], on: Presence = presence) {
  const { feature, events } = recorderFeature();
  const gw = new Gateway(deps, gatewayParts(deps, { presence: on, redis, features: [feature, ...features], nodeId }));
  await gw.start({ timers: false });
  return { gw, events, open: opener(gw) };
}

async function links(names: string[], mode?: 'full' | 'board_only') {
  const f = await lessonWithLinks(deps.sql, { mode });
  const out: ResolvedLink[] = [];
  for (const n of names) out.push((await resolveLinkToken(deps.sql, await f.link(n, { name: n })))!);
  return { f, links: out };
}

describe('the gateway core on Postgres and Redis, driven with plain sockets and a manual clock', () => {
  it("welcomes a lesson's first arrival before its board's seq is read; the page's board.sync waits for it, and no operation committed meanwhile is lost", async () => {
    // node A's read of the board's seq is held until released; node B reads normally
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const heldReads = throughReads(deps.readSql, () => gate);
    const boardA = new BoardService({ ...deps, readSql: heldReads }, { previewDebounceMs: 60_000 });
    const n1 = await newGateway('unit-board-a', [boardFeature(deps, boardA)]);
    const n2 = await newGateway('unit-board-b', [boardFeature(deps, new BoardService(deps, { previewDebounceMs: 60_000 }))]);
    const { links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = n1.open(ann);
    // the welcome does not wait for the board's seq read (held back here until the release)
    await vi.waitUntil(() => a.of('welcome').length === 1, { timeout: 5000 });
    const b = n2.open(bob);
    await n2.gw.idle();
    const op = (c: FakeSocket, ref: string) => n1.gw.message(c.conn, JSON.stringify({ type: 'board.op', ref, op: { type: 'element.add', elements: [rect(ref)] } }), false);
    const opB = (ref: string) => n2.gw.message(b.conn, JSON.stringify({ type: 'board.op', ref, op: { type: 'element.add', elements: [rect(ref)] } }), false);
    n1.gw.message(a.conn, JSON.stringify({ type: 'board.sync', since: 0 }), false);
    op(a, 'a1');
    await new Promise((r) => setTimeout(r, 50));
    expect(a.of('board.state')).toEqual([]); // the page's read waits for the feed's start
    // Bob commits through node B while node A's feed does not know where the board stands yet: a read
    // of the page not waiting for the feed would miss it (before it), and so would the feed (after its seq)
    opB('b1');
    await vi.waitUntil(() => b.of('board.ack').length === 1);
    release();
    await vi.waitUntil(() => a.of('board.state').length === 1 && a.of('board.ack').length === 1);
    opB('b2');
    await vi.waitUntil(() => a.of('board.ops').length > 0 && b.of('board.ack').length === 2);
    // what Ann's page holds: the state it read, then every later seq exactly once, her own as an ack
    const state = a.of('board.state')[0];
    const ids = new Set<string>(state.elements.map((e: any) => e.id));
    const later: [number, string][] = a.of('board.ops').flatMap((m: any) => m.ops).filter((o: any) => o.seq > state.seq).map((o: any) => [o.seq, o.op.elements[0].id]);
    const ack = a.of('board.ack')[0];
    if (ack.seq > state.seq) later.push([ack.seq, 'a1']);
    for (const [, id] of later) ids.add(id);
    expect([...ids].sort()).toEqual(['a1', 'b1', 'b2']);
    expect(later.map(([seq]) => seq).sort()).toEqual(Array.from({ length: 3 - state.seq }, (_, i) => state.seq + 1 + i));
    await Promise.all([n1.gw.close(), n2.gw.close(), boardA.close()]);
  });

  it("sends an arrival, right after its welcome, the lesson's frames that passed while it registered: a chat line here and from another node, a frame for it alone; not one for everyone but it", async () => {
    // node 1 answers Cid's registration only when the test says so; the chat history in Cid's welcome
    // was read with the registration, before the lines below were written
    const held = holdingRegistrationOf(presence, 'Cid');
    const { gw: n1, open: openOn1 } = await newGateway('unit-replay1', [chatFeature(deps)], held.presence);
    const n2 = await newGateway('unit-replay2', [chatFeature(deps)]);
    const { f, links: [ann, bob, cid] } = await links(['Ann', 'Bob', 'Cid']);
    const a = openOn1(ann);
    const b = n2.open(bob);
    await Promise.all([n1.idle(), n2.gw.idle()]);
    n1.message(a.conn, JSON.stringify({ type: 'chat.send', text: 'before Cid' }), false);
    await vi.waitUntil(() => a.of('chat').length === 1);
    await vi.waitUntil(async () => (await deps.redis.llen(`chat:{${f.lesson.id}}`)) === 1);
    const c = openOn1(cid);
    await held.registered;
    n1.message(a.conn, JSON.stringify({ type: 'chat.send', text: 'from Ann, while Cid registers' }), false);
    n2.gw.message(b.conn, JSON.stringify({ type: 'chat.send', text: 'from Bob on node 2, while Cid registers' }), false);
    n1.toPerson(f.lesson.id, c.conn.person.id, JSON.stringify({ type: 'muted', mic: true, by: 'Ann' }));
    n1.broadcast(f.lesson.id, { type: 'note', text: 'not for Cid' }, { exceptPerson: c.conn.person.id });
    // cursors are ephemeral: they cross nodes, and are not repeated to an arrival
    n1.message(a.conn, JSON.stringify({ type: 'cursor', x: 1, y: 1 }), false);
    n2.gw.message(b.conn, JSON.stringify({ type: 'cursor', x: 2, y: 2 }), false);
    await vi.waitUntil(() => a.of('chat').length === 3 && a.of('cursor').length === 1 && b.of('cursor').length === 1);
    expect(c.frames).toEqual([]);
    held.answer();
    await n1.idle();
    const types = c.frames.map((m: any) => m.type);
    expect(types[0]).toBe('welcome');
    // every line exactly once between the welcome's history and what followed it (a page keeps lines by id)
    const lines = [...c.of('welcome')[0].chat, ...c.of('chat')];
    const byId = new Map(lines.map((l: any) => [l.id, l.text]));
    expect([...byId.values()].sort()).toEqual(['before Cid', 'from Ann, while Cid registers', 'from Bob on node 2, while Cid registers']);
    expect(c.of('chat').map((l: any) => l.text).sort()).toEqual(['from Ann, while Cid registers', 'from Bob on node 2, while Cid registers']);
    expect(c.of('muted')).toEqual([{ type: 'muted', mic: true, by: 'Ann' }]);
    expect(c.of('note')).toEqual([]);
    expect(c.of('cursor')).toEqual([]);
    // nobody is arriving any more: nothing is kept
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(0);
    await Promise.all([n1.close(), n2.gw.close()]);
  });

  it("keeps a lesson's board feed and its call's list of people on its Lesson: both go when the lesson closes here, and its next opening starts afresh", async () => {
    const board = new BoardService(deps, { previewDebounceMs: 60_000 });
    const n1 = await newGateway('unit-slots', [boardFeature(deps, board), callFeature(deps, new MediaStates(redis))]);
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob'], 'full');
    const a = n1.open(ann);
    const b = n1.open(bob);
    await n1.gw.idle();
    expect(board.feedsOpen()).toBe(1);
    // Ann calls Bob: the lesson's list of people is read, Bob in it
    const bobId = b.conn.person.id;
    n1.gw.message(a.conn, JSON.stringify({ type: 'rtc.offer', to: bobId, sdp: 'v=0' }), false);
    await vi.waitUntil(() => b.of('rtc.offer').length === 1);
    b.drop();
    a.drop();
    await n1.gw.idle();
    expect(n1.gw.lesson(f.lesson.id)).toBeUndefined();
    expect(board.feedsOpen()).toBe(0);
    // Ann is back while the clock stands still, within the second a list answers "yes" from: a list
    // kept from the lesson's last opening would still have Bob; the new opening reads who is there
    const again = n1.open(ann);
    await n1.gw.idle();
    expect(board.feedsOpen()).toBe(1);
    n1.gw.message(again.conn, JSON.stringify({ type: 'rtc.offer', to: bobId, sdp: 'v=0' }), false);
    await vi.waitUntil(() => again.of('error').length === 1);
    expect(again.of('error')).toMatchObject([{ code: 'not_found', ref: 'rtc.offer' }]);
    again.drop();
    await n1.gw.idle();
    expect(board.feedsOpen()).toBe(0);
    await n1.gw.close();
  });

  it.each([['Redis']] as const)('relays between two nodes through the one lesson channel (%s): a frame for everyone, a frame for one person, a close', async () => {
    const n1 = await newGateway('unit-c1');
    const n2 = await newGateway('unit-c2');
    const { f, links: people } = await links(['Ann', 'Bob', 'Cid']);
    await relaysBetweenTwoNodes(n1, n2, f.lesson.id, people);
  });
});
