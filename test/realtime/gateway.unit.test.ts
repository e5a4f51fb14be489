import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveLinkToken, type ResolvedLink } from '../../src/domain/links.js';
import { readMeterSeeds } from '../../src/metering/meters.js';
import type { Redis } from '../../src/redis.js';
import type { ClientConnection, SocketLike } from '../../realtime/ClientConnection.js';
import type { GatewayFeature } from '../../realtime/features/api.js';
import { boardFeature } from '../../realtime/features/board/feature.js';
import { chatFeature } from '../../realtime/features/chat/feature.js';
import { BoardService } from '../../realtime/features/board/service.js';
import { rect } from '../board/factories.js';
import { throughReads } from '../board/helpers.js';
import { Gateway } from '../../realtime/Gateway.js';
import { gatewayParts } from '../../realtime/parts.js';
import { RedisPresence } from '../../realtime/presence/RedisPresence.js';
import { InMemoryPresence } from '../../realtime/presence/InMemoryPresence.js';
import { BusHub, InMemoryBus } from '../../realtime/bus/InMemoryBus.js';
import type { Bus } from '../../realtime/bus/Bus.js';
import type { Presence } from '../../realtime/presence/Presence.js';
import { gatewayTiming } from '../../realtime/timing.js';
import { makeDeps, ManualClock } from '../helpers/deps.js';
import { eventsOf } from '../helpers/lessons.js';
import { lessonRow, lessonWithLinks, sessionsOf } from './helpers/fixtures.js';
import { isolatedEnv } from '../helpers/isolation.js';

/**
 * The gateway core without uWS: plain socket objects, a clock the test
 * moves, the parts of realtime/parts.ts on real Postgres and Redis; the
 * relay between nodes also on the in-memory presence and bus (no Redis). No
 * sleeps: the test waits for Gateway.idle(), which drains joins, departures,
 * feature hooks and bus publishes.
 */
class FakeSocket implements SocketLike {
  readonly frames: any[] = [];
  closedWith: number | undefined;
  conn!: ClientConnection;
  constructor(private readonly gw: Gateway) {}
  send(data: string): number {
    this.frames.push(JSON.parse(data));
    return 1;
  }
  cork(fn: () => void): void {
    fn();
  }
  /** as uWS does: the close is reported back to the gateway */
  end(code: number): void {
    if (this.closedWith !== undefined) return;
    this.closedWith = code;
    this.gw.closed(this.conn);
  }
  getBufferedAmount(): number {
    return 0;
  }
  of(type: string): any[] {
    return this.frames.filter((f) => f.type === type);
  }
  /** the client goes away (no close code of ours) */
  drop(): void {
    this.closedWith = 1006;
    this.gw.closed(this.conn);
  }
}

/** What the features hear, in order. */
function recorderFeature() {
  const events: string[] = [];
  const feature: GatewayFeature = {
    name: 'recorder',
    onLessonOpen: (l) => void events.push(`open ${l.id.slice(0, 4)}`),
    onLessonClose: (l) => void events.push(`close ${l.id.slice(0, 4)}`),
    onClosed: ({ conn, personLeft }) => void events.push(`closed ${conn.person.name} ${personLeft ? 'left' : 'stays'}`),
  };
  return { feature, events };
}

const env = await isolatedEnv();
const clock = new ManualClock();
const deps = makeDeps({ env, clock });
const timing = gatewayTiming(deps.config);
let redis: Redis;
let presence: Presence;

beforeAll(() => {
  redis = deps.redis.duplicate();
  redis.on('error', () => undefined); // disconnected on purpose below
  presence = new RedisPresence(redis, { ...timing, loadSeed: async (id) => (await readMeterSeeds(deps.readSql, [id]))[0] });
});
afterAll(async () => {
  redis.disconnect();
  await deps.close();
});

/** `on`: the presence and the bus of the nodes, Redis's unless given (the in-memory ones: `inMemory()`). */
async function newGateway(nodeId: string, features: GatewayFeature[] = [], on: { presence?: Presence; bus?: (nodeId: string) => Bus } = {}) {
  const { feature, events } = recorderFeature();
  const gw = new Gateway(deps, gatewayParts(deps, { presence: on.presence ?? presence, bus: on.bus?.(nodeId), redis, features: [feature, ...features], nodeId }));
  await gw.start({ timers: false });
  const open = (link: ResolvedLink) => {
    const s = new FakeSocket(gw);
    s.conn = gw.open(s, link, '127.0.0.1');
    return s;
  };
  return { gw, events, open };
}

/**
 * A node whose presence answers the registration of the person named `name` only when the test
 * calls `answer` (Redis has decided it already: `registered` resolves then).
 */
async function nodeHoldingRegistrationOf(name: string, nodeId: string, features: GatewayFeature[] = []) {
  let answer!: () => void;
  const answered = new Promise<void>((r) => (answer = r));
  let resolveRegistered!: () => void;
  const registered = new Promise<void>((r) => (resolveRegistered = r));
  const held: Presence = Object.create(presence, {
    join: {
      value: async (lessonId: string, input: Parameters<Presence['join']>[1]) => {
        const res = await presence.join(lessonId, input);
        if (input.info.name === name) (resolveRegistered(), await answered);
        return res;
      },
    },
  });
  const gw = new Gateway(deps, gatewayParts(deps, { presence: held, redis, nodeId, features }));
  await gw.start({ timers: false });
  const open = (link: ResolvedLink) => {
    const s = new FakeSocket(gw);
    s.conn = gw.open(s, link, '127.0.0.1');
    return s;
  };
  return { gw, open, registered, answer };
}

/** The lesson's sessions after a minute more and a flush (none where nobody was counted). */
async function sessionsAfterAMinute(gw: Gateway, lessonId: string) {
  clock.advance(60_000);
  await gw.maintenance.flush();
  await gw.idle();
  return sessionsOf(deps.sql, lessonId);
}

async function links(names: string[]) {
  const f = await lessonWithLinks(deps.sql);
  const out: ResolvedLink[] = [];
  for (const n of names) out.push((await resolveLinkToken(deps.sql, await f.link(n, { name: n })))!);
  return { f, links: out };
}

/** Nodes that share an in-process presence and bus: no Redis between them. */
function inMemory() {
  const hub = new BusHub();
  return { presence: new InMemoryPresence({ ...timing, loadSeed: async (id: string) => (await readMeterSeeds(deps.readSql, [id]))[0] }), bus: (nodeId: string) => new InMemoryBus(hub, nodeId) };
}

describe('the gateway core, driven with plain sockets and a manual clock', () => {
  it('welcomes, relays a cursor to the others and not back, tells who left, and closes the lesson with its last socket', async () => {
    const { gw, events, open } = await newGateway('unit-a');
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = open(ann);
    await gw.idle();
    const b = open(bob);
    await gw.idle();
    expect(a.of('welcome')).toHaveLength(1);
    expect(a.of('presence')).toMatchObject([{ event: 'joined', person: { name: 'Bob' } }]);
    expect(b.of('welcome')[0].people.map((p: any) => p.name).sort()).toEqual(['Ann', 'Bob']);
    expect(gw.lesson(f.lesson.id)?.present()).toHaveLength(2);

    gw.message(a.conn, JSON.stringify({ type: 'cursor', x: 1, y: 2 }), false);
    expect(b.of('cursor')).toEqual([{ type: 'cursor', from: a.conn.person.id, x: 1, y: 2 }]);
    expect(a.of('cursor')).toEqual([]);

    clock.advance(30_000);
    b.drop();
    await gw.idle();
    expect(a.of('presence').at(-1)).toMatchObject({ event: 'left', person: { name: 'Bob' } });
    a.drop();
    await gw.idle();
    expect(gw.lesson(f.lesson.id)).toBeUndefined();
    const id = f.lesson.id.slice(0, 4);
    expect(events).toEqual([`open ${id}`, 'closed Bob left', `close ${id}`, 'closed Ann left']);
    await gw.close();
  });

  it("runs the features' onClosed when Redis was unreachable at the departure: once, when the retried departure is heard", async () => {
    const { gw, events, open } = await newGateway('unit-b');
    const { links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    expect(b.of('welcome')).toHaveLength(1);

    redis.disconnect();
    clock.advance(5_000);
    b.drop();
    await gw.idle();
    expect(gw.pendingDepartures).toBe(1);
    expect(events.filter((e) => e.startsWith('closed'))).toEqual([]);

    await redis.connect();
    clock.advance(1_000);
    await gw.maintenance.heartbeat();
    await gw.idle();
    expect(gw.pendingDepartures).toBe(0);
    expect(events.filter((e) => e.startsWith('closed'))).toEqual(['closed Bob left']);
    expect(a.of('presence').at(-1)).toMatchObject({ event: 'left', person: { name: 'Bob' } });
    await gw.close();
    expect(events.filter((e) => e.startsWith('closed'))).toEqual(['closed Bob left', 'closed Ann left']);
  });

  it('charges a flush no further than a departure Redis has not heard yet (a watermark cannot be taken back)', async () => {
    const { gw, open } = await newGateway('unit-g');
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    clock.advance(1_000);
    await gw.maintenance.heartbeat();
    await gw.maintenance.flush();
    await gw.idle();
    expect(await sessionsOf(deps.sql, f.lesson.id)).toHaveLength(1);

    redis.disconnect();
    clock.advance(2_000);
    b.drop(); // Bob leaves 3 s in, while Redis is unreachable: his departure waits, dated then
    await gw.idle();
    expect(gw.pendingDepartures).toBe(1);
    await redis.connect();
    clock.advance(20_000);
    gw.pong(a.conn); // Ann is alive and well
    await gw.maintenance.guard('flush', () => gw.maintenance.flush()); // before the heartbeat retries Bob's departure
    await gw.idle();
    expect((await lessonRow(deps.sql, f.lesson.id)).billed_seconds).toBeLessThanOrEqual(3);
    await gw.maintenance.heartbeat();
    await gw.idle();
    expect(gw.pendingDepartures).toBe(0);
    clock.advance(10_000);
    await gw.maintenance.flush();
    await gw.idle();
    expect((await lessonRow(deps.sql, f.lesson.id)).billed_seconds).toBe(3);
    await gw.close();
  });

  it('closes arrivals whose lesson could not open (unavailable) before presence counts them: no session, no lesson.started', async () => {
    const broken: GatewayFeature = {
      name: 'broken-board',
      onLessonOpen: async () => {
        await new Promise((r) => setTimeout(r, 20));
        throw new Error('board unavailable');
      },
    };
    const gw = new Gateway(deps, gatewayParts(deps, { presence, redis, features: [broken], nodeId: 'unit-broken' }));
    await gw.start({ timers: false });
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = new FakeSocket(gw);
    a.conn = gw.open(a, ann, '127.0.0.1');
    const b = new FakeSocket(gw);
    b.conn = gw.open(b, bob, '127.0.0.1');
    await gw.idle();
    expect([a.closedWith, b.closedWith]).toEqual([4503, 4503]);
    expect(a.of('welcome')).toEqual([]);
    expect((await presence.people(f.lesson.id)).count).toBe(0);
    // presence registers an arrival only once its lesson is open here: two people whose board
    // could not load start no session (it would end as a zero-length one with a lesson.started)
    expect(await sessionsAfterAMinute(gw, f.lesson.id)).toEqual([]);
    expect((await lessonRow(deps.sql, f.lesson.id)).billed_seconds).toBe(0);
    await gw.close();
  });

  it('refuses an arrival in beforePresence before presence counts it: the others hear nothing, no session starts, no participant.joined', async () => {
    const refuseBob: GatewayFeature = {
      name: 'refuse-bob',
      // asynchronous, as the teacher feature's exact removal check is
      beforePresence: async ({ conn }) => {
        await new Promise((r) => setTimeout(r, 20));
        if (conn.person.name === 'Bob') conn.close('forbidden');
      },
    };
    const { gw, open } = await newGateway('unit-refuse', [refuseBob]);
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = open(ann);
    await gw.idle();
    const b = open(bob);
    await gw.idle();
    expect(b.closedWith).toBe(4403);
    expect(b.of('welcome')).toEqual([]);
    expect(a.of('welcome')).toHaveLength(1);
    expect(a.of('presence')).toEqual([]);
    expect((await presence.people(f.lesson.id)).count).toBe(1);
    expect(await sessionsAfterAMinute(gw, f.lesson.id)).toEqual([]);
    expect((await eventsOf(deps.sql, f.partner.id, 'participant.joined')).map((e) => e.data.name)).toEqual(['Ann']);
    await gw.close();
  });

  it("reads the features' welcome while presence registers the arrival, not before it (one round trip less per join)", async () => {
    let lessonId = '';
    const seen: number[] = [];
    const slowWelcome: GatewayFeature = {
      name: 'slow-welcome',
      // resolves once presence counts the arrival (or gives up after 2 s): were presence to wait
      // for the welcome, this would see a count of 0 and the join would take the 2 s
      welcome: async () => {
        for (let i = 0; i < 200; i++) {
          const { count } = await presence.people(lessonId);
          if (count > 0) {
            seen.push(count);
            break;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
        return { slow: true };
      },
    };
    const { gw, open } = await newGateway('unit-slow-welcome', [slowWelcome]);
    const { f, links: [ann] } = await links(['Ann']);
    lessonId = f.lesson.id;
    const a = open(ann);
    await gw.idle();
    expect(seen).toEqual([1]);
    expect(a.of('welcome')).toMatchObject([{ slow: true, people: [{ name: 'Ann' }] }]);
    await gw.close();
  });

  it("welcomes a lesson's first arrival before its board's seq is read; the page's board.sync waits for it, and no operation committed meanwhile is lost", async () => {
    // node A's read of the board's seq is held until released; node B reads normally
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const heldReads = throughReads(deps.readSql, () => gate);
    const boardA = new BoardService({ ...deps, readSql: heldReads }, { previewDebounceMs: 60_000 });
    const n1 = await newGateway('unit-board-a', [boardFeature(deps, boardA)]);
    const n2 = await newGateway('unit-board-b', [boardFeature(deps, new BoardService(deps, { previewDebounceMs: 60_000 }))]);
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
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

  it("keeps a lesson's presence events off the bus while only this node has connections in it, and sends them once another node has some", async () => {
    const n1 = await newGateway('unit-p1');
    const n2 = await newGateway('unit-p2');
    const { f, links: [ann, bob, cid] } = await links(['Ann', 'Bob', 'Cid']);
    // a listener on the lesson's channel, as another node's subscription would be
    const heard: string[] = [];
    const sub = deps.redis.duplicate();
    await sub.subscribe(`${deps.config.REDIS_KEY_PREFIX}gw:lesson:{${f.lesson.id}}`);
    sub.on('message', (_channel: string, message: string) => {
      const [node, kind] = message.split('\n')[0].split('\t');
      if (kind === 'presence') heard.push(`${node} ${JSON.parse(message.slice(message.indexOf('\n') + 1)).event}`);
    });
    const a = n1.open(ann);
    await n1.gw.idle();
    const b = n1.open(bob);
    await n1.gw.idle();
    b.drop();
    await n1.gw.idle();
    // Ann heard Bob come and go on her node; no other node had anyone to tell
    expect(a.of('presence').map((m: any) => `${m.person.name} ${m.event}`)).toEqual(['Bob joined', 'Bob left']);
    const c = n2.open(cid);
    await n2.gw.idle();
    await vi.waitUntil(() => a.of('presence').length === 3);
    a.drop();
    await n1.gw.idle();
    await vi.waitUntil(() => c.of('presence').length === 1);
    expect(c.of('presence')).toMatchObject([{ event: 'left', person: { name: 'Ann' } }]);
    await vi.waitUntil(() => heard.length === 2);
    expect(heard).toEqual(['unit-p2 joined', 'unit-p1 left']);
    sub.disconnect();
    await Promise.all([n1.gw.close(), n2.gw.close()]);
  });

  it('replays to an arrival the presence events that passed while Redis answered its registration, and keeps no frames once nobody is arriving (memory per connection)', async () => {
    // node 1's presence answers Cid's registration only when the test says so (Redis has decided it already)
    const { gw: n1, open: openOn1, registered: cidRegistered, answer } = await nodeHoldingRegistrationOf('Cid', 'unit-r1');
    const n2 = await newGateway('unit-r2');
    const { f, links: [ann, bob, cid] } = await links(['Ann', 'Bob', 'Cid']);
    const a = openOn1(ann);
    await n1.idle();
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(0);
    const c = openOn1(cid);
    await cidRegistered;
    expect(c.of('welcome')).toEqual([]);
    // Bob arrives on node 2 after Cid's registration and before Cid's welcome
    const b = n2.open(bob);
    await n2.gw.idle();
    await vi.waitUntil(() => a.of('presence').length === 1);
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(1);
    answer();
    await n1.idle();
    expect(c.of('welcome')[0].people.map((p: any) => p.name).sort()).toEqual(['Ann', 'Cid']);
    expect(c.of('presence').map((m: any) => `${m.person.name} ${m.event}`)).toEqual(['Bob joined']);
    // nobody is arriving any more: the lesson keeps no frame, not even of a later departure
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(0);
    b.drop();
    await n2.gw.idle();
    await vi.waitUntil(() => a.of('presence').length === 3 && c.of('presence').length === 2);
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(0);
    await Promise.all([n1.close(), n2.gw.close()]);
  });

  it("sends an arrival, right after its welcome, the lesson's frames that passed while it registered: a chat line here and from another node, a frame for it alone; not one for everyone but it", async () => {
    // node 1 answers Cid's registration only when the test says so; the chat history in Cid's welcome
    // was read with the registration, before the lines below were written
    const { gw: n1, open: openOn1, registered: cidRegistered, answer } = await nodeHoldingRegistrationOf('Cid', 'unit-replay1', [chatFeature(deps)]);
    const n2 = await newGateway('unit-replay2', [chatFeature(deps)]);
    const { f, links: [ann, bob, cid] } = await links(['Ann', 'Bob', 'Cid']);
    const a = openOn1(ann);
    const b = n2.open(bob);
    await Promise.all([n1.idle(), n2.gw.idle()]);
    n1.message(a.conn, JSON.stringify({ type: 'chat.send', text: 'before Cid' }), false);
    await vi.waitUntil(() => a.of('chat').length === 1);
    await vi.waitUntil(async () => (await deps.redis.llen(`chat:{${f.lesson.id}}`)) === 1);
    const c = openOn1(cid);
    await cidRegistered;
    n1.message(a.conn, JSON.stringify({ type: 'chat.send', text: 'from Ann, while Cid registers' }), false);
    n2.gw.message(b.conn, JSON.stringify({ type: 'chat.send', text: 'from Bob on node 2, while Cid registers' }), false);
    n1.toPerson(f.lesson.id, c.conn.person.id, JSON.stringify({ type: 'muted', mic: true, by: 'Ann' }));
    n1.broadcast(f.lesson.id, { type: 'note', text: 'not for Cid' }, { exceptPerson: c.conn.person.id });
    // cursors are ephemeral: they cross nodes, and are not repeated to an arrival
    n1.message(a.conn, JSON.stringify({ type: 'cursor', x: 1, y: 1 }), false);
    n2.gw.message(b.conn, JSON.stringify({ type: 'cursor', x: 2, y: 2 }), false);
    await vi.waitUntil(() => a.of('chat').length === 3 && a.of('cursor').length === 1 && b.of('cursor').length === 1);
    expect(c.frames).toEqual([]);
    answer();
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

  it.each([
    ['Redis', () => ({})],
    ['the in-memory presence and bus', inMemory],
  ] as const)('relays between two nodes through the one lesson channel (%s): a frame for everyone, a frame for one person, a close', async (_, on) => {
    const shared = on();
    const n1 = await newGateway('unit-c1', [], shared);
    const n2 = await newGateway('unit-c2', [], shared);
    const { f, links: [ann, bob, cid] } = await links(['Ann', 'Bob', 'Cid']);
    const a = n1.open(ann);
    await n1.gw.idle();
    const b = n2.open(bob);
    const c = n2.open(cid);
    await n2.gw.idle();
    // the `joined` of people on the other node arrive through the lesson's channel
    expect(a.of('welcome')).toHaveLength(1);
    await vi.waitUntil(() => a.of('presence').length === 2);

    n1.gw.broadcast(f.lesson.id, { type: 'note', text: 'hi' });
    n1.gw.toPerson(f.lesson.id, b.conn.person.id, JSON.stringify({ type: 'muted', mic: true }));
    await n1.gw.idle();
    await vi.waitUntil(() => b.of('note').length === 1 && c.of('note').length === 1 && b.of('muted').length === 1);
    expect(c.of('muted')).toEqual([]);

    n1.gw.closePerson(f.lesson.id, c.conn.person.id, 'forbidden');
    await vi.waitUntil(() => c.closedWith === 4403);
    expect(b.closedWith).toBeUndefined();
    await Promise.all([n1.gw.close(), n2.gw.close()]);
  });

  it('after Redis lost its state, registers its sockets again and tells nobody that they themselves joined', async () => {
    const { gw, open } = await newGateway('unit-e');
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    const a = open(ann);
    await gw.idle();
    const b = open(bob);
    await gw.idle();
    // Redis loses everything of this test file (its own key prefix)
    const admin = new IORedis(deps.config.REDIS_URL);
    const keys = await admin.keys(`${deps.config.REDIS_KEY_PREFIX}*`);
    if (keys.length) await admin.del(...keys);
    admin.disconnect();
    const before = { a: a.frames.length, b: b.frames.length };
    clock.advance(1_000);
    await gw.maintenance.heartbeat();
    await gw.idle();
    expect((await presence.people(f.lesson.id)).people.map((p) => p.name).sort()).toEqual(['Ann', 'Bob']);
    const joinedSelf = (s: FakeSocket, name: string, from: number) => s.frames.slice(from).filter((m) => m.type === 'presence' && m.event === 'joined' && m.person.name === name);
    expect(joinedSelf(a, 'Ann', before.a)).toEqual([]);
    expect(joinedSelf(b, 'Bob', before.b)).toEqual([]);
    expect(a.frames.slice(before.a).filter((m) => m.event === 'sync')).toHaveLength(1);
    await gw.close();
  });

  it('after Redis lost its state, a sweep re-registers the live sockets before it judges any lesson empty or orphaned', async () => {
    const { gw, open } = await newGateway('unit-f');
    const { f, links: [ann, bob] } = await links(['Ann', 'Bob']);
    open(ann);
    open(bob);
    await gw.idle();
    clock.advance(1_000);
    await gw.maintenance.flush();
    await gw.idle();
    expect(await sessionsOf(deps.sql, f.lesson.id)).toHaveLength(1);
    const admin = new IORedis(deps.config.REDIS_URL);
    const keys = await admin.keys(`${deps.config.REDIS_KEY_PREFIX}*`);
    if (keys.length) await admin.del(...keys);
    admin.disconnect();
    // long past the orphan limit and the idle end, and the sweep comes before any heartbeat
    clock.advance(gw.timing.orphanMs + gw.timing.idleMs);
    await gw.maintenance.sweep();
    await gw.idle();
    expect((await presence.people(f.lesson.id)).people.map((p) => p.name).sort()).toEqual(['Ann', 'Bob']);
    const [s] = await sessionsOf(deps.sql, f.lesson.id);
    expect(s.ended_at).toBeNull();
    await gw.close();
  });

  it('owns its timers: start() sets them, close() leaves none', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const { feature } = recorderFeature();
      const gw = new Gateway(deps, gatewayParts(deps, { presence, redis, features: [feature], nodeId: 'unit-d' }));
      await gw.start();
      expect(vi.getTimerCount()).toBeGreaterThan(0);
      await gw.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
