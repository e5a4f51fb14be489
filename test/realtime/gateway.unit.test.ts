import { afterAll, describe, expect, it, vi } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.js';
import type { GatewayFeature } from '../../realtime/features/api.js';
import { Gateway } from '../../realtime/Gateway.js';
import { memoryParts, memoryWorld, type MemoryWorld } from '../../realtime/parts.js';
import { InMemoryBus } from '../../realtime/bus/InMemoryBus.js';
import type { Presence } from '../../realtime/presence/Presence.js';
import { makeDeps, ManualClock } from '../helpers/deps.js';
import { resolvedLink } from './helpers/fixtures.js';
import { holdingRegistrationOf, opener, recorderFeature, relaysBetweenTwoNodes } from './helpers/plainSockets.js';

/**
 * The gateway core without uWS, Postgres or Redis: plain socket objects, a
 * clock the test moves, the in-memory parts (realtime/parts.ts memoryParts:
 * presence, bus, ledger, links, per-person rates). Its deps point at a closed
 * port and its Redis client is disconnected, so a part that still reached for
 * a database would fail these tests. No sleeps: the test waits for
 * Gateway.idle(), which drains joins, departures, feature hooks and bus
 * publishes. What lives in the stores themselves (the board, the chat
 * history, Redis pub/sub): gateway.stores.test.ts.
 */
const NOWHERE = { DATABASE_URL: 'postgres://postgres@127.0.0.1:9/nowhere', REDIS_URL: 'redis://127.0.0.1:9' };
const clock = new ManualClock();
const deps = makeDeps({ env: NOWHERE, clock });
deps.redis.on('error', () => undefined);
deps.redis.disconnect();
afterAll(() => deps.close());

/** One deployment per test: its nodes share presence, bus, ledger and links. */
let world: MemoryWorld = memoryWorld(deps.config);
function newWorld(): MemoryWorld {
  return (world = memoryWorld(deps.config));
}

async function newGateway(nodeId: string, features: GatewayFeature[] = [], presence?: Presence) {
  const { feature, events } = recorderFeature();
  const gw = new Gateway(deps, memoryParts(deps, world, { presence, features: [feature, ...features], nodeId }));
  await gw.start({ timers: false });
  return { gw, events, open: opener(gw) };
}

/** Links of one new lesson, one per name, as a lookup resolves them. */
function links(names: string[]) {
  const lessonId = randomBase62(12);
  const expiresAt = new Date(clock.now().getTime() + 3 * 3600_000);
  const out = names.map((name) => resolvedLink({ lessonId, name, expiresAt }));
  return { f: { lesson: { id: lessonId } }, links: out };
}

/**
 * The world's presence, unreachable while `down` (as Redis is when its connection is lost): every
 * call fails, and nothing is decided.
 */
function unreachablePresence() {
  const state = { down: false };
  const target = world.presence;
  const presence = new Proxy(target, {
    get(t, key) {
      const v = Reflect.get(t, key, t);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => (state.down ? Promise.reject(new Error('presence unreachable')) : v.apply(t, args));
    },
  }) as Presence;
  return { presence, state };
}

/** The lesson's sessions after a minute more and a flush (none where nobody was counted). */
async function sessionsAfterAMinute(gw: Gateway, lessonId: string) {
  clock.advance(60_000);
  await gw.maintenance.flush();
  await gw.idle();
  return world.ledger.sessionsOf(lessonId);
}

describe('the gateway core, driven with plain sockets and a manual clock', () => {
  it('welcomes, relays a cursor to the others and not back, tells who left, and closes the lesson with its last socket', async () => {
    newWorld();
    const { gw, events, open } = await newGateway('unit-a');
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
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
    newWorld();
    const redis = unreachablePresence();
    const { gw, events, open } = await newGateway('unit-b', [], redis.presence);
    const { links: [ann, bob] } = links(['Ann', 'Bob']);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    expect(b.of('welcome')).toHaveLength(1);

    redis.state.down = true;
    clock.advance(5_000);
    b.drop();
    await gw.idle();
    expect(gw.pendingDepartures).toBe(1);
    expect(events.filter((e) => e.startsWith('closed'))).toEqual([]);

    redis.state.down = false;
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
    newWorld();
    const redis = unreachablePresence();
    const { gw, open } = await newGateway('unit-g', [], redis.presence);
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    clock.advance(1_000);
    await gw.maintenance.heartbeat();
    await gw.maintenance.flush();
    await gw.idle();
    expect(world.ledger.sessionsOf(f.lesson.id)).toHaveLength(1);

    redis.state.down = true;
    clock.advance(2_000);
    b.drop(); // Bob leaves 3 s in, while Redis is unreachable: his departure waits, dated then
    await gw.idle();
    expect(gw.pendingDepartures).toBe(1);
    redis.state.down = false;
    clock.advance(20_000);
    gw.pong(a.conn); // Ann is alive and well
    await gw.maintenance.guard('flush', () => gw.maintenance.flush()); // before the heartbeat retries Bob's departure
    await gw.idle();
    expect(world.ledger.billedSeconds(f.lesson.id)).toBeLessThanOrEqual(3);
    await gw.maintenance.heartbeat();
    await gw.idle();
    expect(gw.pendingDepartures).toBe(0);
    clock.advance(10_000);
    await gw.maintenance.flush();
    await gw.idle();
    expect(world.ledger.billedSeconds(f.lesson.id)).toBe(3);
    await gw.close();
  });

  it('closes arrivals whose lesson could not open (unavailable) before presence counts them: no session, no lesson.started', async () => {
    newWorld();
    const broken: GatewayFeature = {
      name: 'broken-board',
      onLessonOpen: async () => {
        await new Promise((r) => setTimeout(r, 20));
        throw new Error('board unavailable');
      },
    };
    const gw = new Gateway(deps, memoryParts(deps, world, { features: [broken], nodeId: 'unit-broken' }));
    await gw.start({ timers: false });
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    const open = opener(gw);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    expect([a.closedWith, b.closedWith]).toEqual([4503, 4503]);
    expect(a.of('welcome')).toEqual([]);
    expect((await world.presence.people(f.lesson.id)).count).toBe(0);
    // presence registers an arrival only once its lesson is open here: two people whose board
    // could not load start no session (it would end as a zero-length one with a lesson.started)
    expect(await sessionsAfterAMinute(gw, f.lesson.id)).toEqual([]);
    expect(world.ledger.billedSeconds(f.lesson.id)).toBe(0);
    await gw.close();
  });

  it('refuses an arrival in beforePresence before presence counts it: the others hear nothing, no session starts, no participant.joined', async () => {
    newWorld();
    const refuseBob: GatewayFeature = {
      name: 'refuse-bob',
      // asynchronous, as the teacher feature's exact removal check is
      beforePresence: async ({ conn }) => {
        await new Promise((r) => setTimeout(r, 20));
        if (conn.person.name === 'Bob') conn.close('forbidden');
      },
    };
    const { gw, open } = await newGateway('unit-refuse', [refuseBob]);
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    const a = open(ann);
    await gw.idle();
    const b = open(bob);
    await gw.idle();
    expect(b.closedWith).toBe(4403);
    expect(b.of('welcome')).toEqual([]);
    expect(a.of('welcome')).toHaveLength(1);
    expect(a.of('presence')).toEqual([]);
    expect((await world.presence.people(f.lesson.id)).count).toBe(1);
    expect(await sessionsAfterAMinute(gw, f.lesson.id)).toEqual([]);
    expect(world.ledger.joins.map((j) => j.name)).toEqual(['Ann']);
    await gw.close();
  });

  it("reads the features' welcome while presence registers the arrival, not before it (one round trip less per join)", async () => {
    newWorld();
    let lessonId = '';
    const seen: number[] = [];
    const slowWelcome: GatewayFeature = {
      name: 'slow-welcome',
      // resolves once presence counts the arrival (or gives up after 2 s): were presence to wait
      // for the welcome, this would see a count of 0 and the join would take the 2 s
      welcome: async () => {
        for (let i = 0; i < 200; i++) {
          const { count } = await world.presence.people(lessonId);
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
    const { f, links: [ann] } = links(['Ann']);
    lessonId = f.lesson.id;
    const a = open(ann);
    await gw.idle();
    expect(seen).toEqual([1]);
    expect(a.of('welcome')).toMatchObject([{ slow: true, people: [{ name: 'Ann' }] }]);
    await gw.close();
  });

  it("keeps a lesson's presence events off the bus while only this node has connections in it, and sends them once another node has some", async () => {
    newWorld();
    const n1 = await newGateway('unit-p1');
    const n2 = await newGateway('unit-p2');
    const { f, links: [ann, bob, cid] } = links(['Ann', 'Bob', 'Cid']);
    // a listener on the lesson's channel, as another node's subscription would be
    const heard: string[] = [];
    const sub = new InMemoryBus(world.hub, 'listener');
    sub.receiver = (_lessonId, e) => {
      if (e.kind === 'presence') heard.push(`${e.node} ${JSON.parse(e.payload).event}`);
    };
    await sub.subscribe(f.lesson.id);
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
    await sub.close();
    await Promise.all([n1.gw.close(), n2.gw.close()]);
  });

  it('replays to an arrival the presence events that passed while Redis answered its registration, and keeps no frames once nobody is arriving (memory per connection)', async () => {
    newWorld();
    // node 1's presence answers Cid's registration only when the test says so (Redis has decided it already)
    const held = holdingRegistrationOf(world.presence, 'Cid');
    const { gw: n1, open: openOn1 } = await newGateway('unit-r1', [], held.presence);
    const n2 = await newGateway('unit-r2');
    const { f, links: [ann, bob, cid] } = links(['Ann', 'Bob', 'Cid']);
    const a = openOn1(ann);
    await n1.idle();
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(0);
    const c = openOn1(cid);
    await held.registered;
    expect(c.of('welcome')).toEqual([]);
    // Bob arrives on node 2 after Cid's registration and before Cid's welcome
    const b = n2.open(bob);
    await n2.gw.idle();
    await vi.waitUntil(() => a.of('presence').length === 1);
    expect(n1.lesson(f.lesson.id)!.keptFrames()).toBe(1);
    held.answer();
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

  it.each([['the in-memory presence and bus']] as const)('relays between two nodes through the one lesson channel (%s): a frame for everyone, a frame for one person, a close', async () => {
    newWorld();
    const n1 = await newGateway('unit-c1');
    const n2 = await newGateway('unit-c2');
    const { f, links: people } = links(['Ann', 'Bob', 'Cid']);
    await relaysBetweenTwoNodes(n1, n2, f.lesson.id, people);
  });

  it('after Redis lost its state, registers its sockets again and tells nobody that they themselves joined', async () => {
    newWorld();
    const { gw, open } = await newGateway('unit-e');
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    const a = open(ann);
    await gw.idle();
    const b = open(bob);
    await gw.idle();
    // presence loses everything, as a restarted Redis does
    world.presence.clear();
    const before = { a: a.frames.length, b: b.frames.length };
    clock.advance(1_000);
    await gw.maintenance.heartbeat();
    await gw.idle();
    expect((await world.presence.people(f.lesson.id)).people.map((p) => p.name).sort()).toEqual(['Ann', 'Bob']);
    const joinedSelf = (s: typeof a, name: string, from: number) => s.frames.slice(from).filter((m) => m.type === 'presence' && m.event === 'joined' && m.person.name === name);
    expect(joinedSelf(a, 'Ann', before.a)).toEqual([]);
    expect(joinedSelf(b, 'Bob', before.b)).toEqual([]);
    expect(a.frames.slice(before.a).filter((m) => m.event === 'sync')).toHaveLength(1);
    await gw.close();
  });

  it('after Redis lost its state, a sweep re-registers the live sockets before it judges any lesson empty or orphaned', async () => {
    newWorld();
    const { gw, open } = await newGateway('unit-f');
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    open(ann);
    open(bob);
    await gw.idle();
    clock.advance(1_000);
    await gw.maintenance.flush();
    await gw.idle();
    expect(world.ledger.sessionsOf(f.lesson.id)).toHaveLength(1);
    world.presence.clear();
    // long past the orphan limit and the idle end, and the sweep comes before any heartbeat
    clock.advance(gw.timing.orphanMs + gw.timing.idleMs);
    await gw.maintenance.sweep();
    await gw.idle();
    expect((await world.presence.people(f.lesson.id)).people.map((p) => p.name).sort()).toEqual(['Ann', 'Bob']);
    const [s] = world.ledger.sessionsOf(f.lesson.id);
    expect(s.ended_at).toBeNull();
    await gw.close();
  });

  it('writes nothing at a flush that would change nothing: a paused session is not charged again, its snapshot rewritten only when the heartbeat is due; the lesson closed, nothing of it is kept', async () => {
    newWorld();
    const { gw, open } = await newGateway('unit-marks');
    const { f, links: [ann, bob] } = links(['Ann', 'Bob']);
    const a = open(ann);
    const b = open(bob);
    await gw.idle();
    clock.advance(10_000);
    await gw.maintenance.flush();
    await gw.idle();
    expect(gw.lesson(f.lesson.id)?.meterRunning).toBe(true);
    b.drop(); // the meter pauses: its charge and snapshot are written with the pause
    await gw.idle();
    const flush = async (ms: number) => {
      const before = { ...world.ledger.written };
      clock.advance(ms);
      await gw.maintenance.flush();
      await gw.idle();
      return { charges: world.ledger.written.charges - before.charges, snapshots: world.ledger.written.snapshots - before.snapshots };
    };
    expect(await flush(gw.timing.flushMs)).toEqual({ charges: 0, snapshots: 0 });
    expect(gw.lesson(f.lesson.id)?.meterRunning).toBe(false);
    expect(await flush(gw.timing.orphanMs / 3)).toEqual({ charges: 0, snapshots: 1 });
    expect(world.ledger.billedSeconds(f.lesson.id)).toBe(10);
    a.drop();
    await gw.idle();
    expect(gw.lesson(f.lesson.id)).toBeUndefined();
    await gw.close();
  });

  it('owns its timers: start() sets them, close() leaves none', async () => {
    newWorld();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const { feature } = recorderFeature();
      const gw = new Gateway(deps, memoryParts(deps, world, { features: [feature], nodeId: 'unit-d' }));
      await gw.start();
      expect(vi.getTimerCount()).toBeGreaterThan(0);
      await gw.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
