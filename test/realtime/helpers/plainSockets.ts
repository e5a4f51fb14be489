import { expect, vi } from 'vitest';
import type { ResolvedLink } from '../../../src/domain/links.js';
import type { ClientConnection, SocketLike } from '../../../realtime/ClientConnection.js';
import type { GatewayFeature } from '../../../realtime/features/api.js';
import type { Gateway } from '../../../realtime/Gateway.js';
import type { Presence } from '../../../realtime/presence/Presence.js';

/** A socket as the gateway core sees one (SocketLike), keeping what it was sent. */
export class FakeSocket implements SocketLike {
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

/** Opens plain sockets on a gateway, each admitted with its link. */
export function opener(gw: Gateway): (link: ResolvedLink) => FakeSocket {
  return (link) => {
    const s = new FakeSocket(gw);
    s.conn = gw.open(s, link, '127.0.0.1');
    return s;
  };
}

/** What the features hear, in order. */
export function recorderFeature() {
  const events: string[] = [];
  const feature: GatewayFeature = {
    name: 'recorder',
    onLessonOpen: (l) => void events.push(`open ${l.id.slice(0, 4)}`),
    onLessonClose: (l) => void events.push(`close ${l.id.slice(0, 4)}`),
    onClosed: ({ conn, personLeft }) => void events.push(`closed ${conn.person.name} ${personLeft ? 'left' : 'stays'}`),
  };
  return { feature, events };
}

/**
 * `presence`, except that it answers the registration of the person named `name` only when the
 * test calls `answer` (it has decided it already: `registered` resolves then).
 */
export function holdingRegistrationOf(presence: Presence, name: string) {
  let answer!: () => void;
  const answered = new Promise<void>((r) => (answer = r));
  let resolveRegistered!: () => void;
  const registered = new Promise<void>((r) => (resolveRegistered = r));
  const join = async (lessonId: string, input: Parameters<Presence['join']>[1]) => {
    const res = await presence.join(lessonId, input);
    if (input.info.name === name) (resolveRegistered(), await answered);
    return res;
  };
  // every other call goes to `presence` itself (an in-memory one keeps its state in its own fields)
  const held = new Proxy(presence, {
    get: (t, key) => {
      if (key === 'join') return join;
      const v = Reflect.get(t, key, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
  return { presence: held, registered, answer };
}

type Node = { gw: Gateway; open: (link: ResolvedLink) => FakeSocket };

/**
 * Two nodes relay through the one lesson channel, whatever carries it: the `joined` of people on
 * the other node, a frame for everyone, a frame for one person, a close. Closes both nodes.
 */
export async function relaysBetweenTwoNodes(n1: Node, n2: Node, lessonId: string, [ann, bob, cid]: ResolvedLink[]): Promise<void> {
  const a = n1.open(ann);
  await n1.gw.idle();
  const b = n2.open(bob);
  const c = n2.open(cid);
  await n2.gw.idle();
  // the `joined` of people on the other node arrive through the lesson's channel
  expect(a.of('welcome')).toHaveLength(1);
  await vi.waitUntil(() => a.of('presence').length === 2);

  n1.gw.broadcast(lessonId, { type: 'note', text: 'hi' });
  n1.gw.toPerson(lessonId, b.conn.person.id, JSON.stringify({ type: 'muted', mic: true }));
  await n1.gw.idle();
  await vi.waitUntil(() => b.of('note').length === 1 && c.of('note').length === 1 && b.of('muted').length === 1);
  expect(c.of('muted')).toEqual([]);

  n1.gw.closePerson(lessonId, c.conn.person.id, 'forbidden');
  await vi.waitUntil(() => c.closedWith === 4403);
  expect(b.closedWith).toBeUndefined();
  await Promise.all([n1.gw.close(), n2.gw.close()]);
}
