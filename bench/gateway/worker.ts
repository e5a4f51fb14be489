import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { Histogram } from './histogram.js';
import { type LeanHandlers, LeanWebSocket, OPEN } from './leanClient.js';

/**
 * One load-generator process (forked by loadtest.ts). It owns whole lessons,
 * so a cursor's send time and its arrival at the other participants are
 * measured on one clock. Phases are driven by the parent over IPC.
 */
interface Init {
  cmd: 'init';
  /** every connection's URL and the index of the server node it goes to */
  lessons: { id: string; urls: string[]; nodes: number[] }[];
  /** how many server nodes there are (figures are kept per node) */
  nodeCount: number;
  /** `sio`: the Socket.IO wire protocol (Engine.IO v4 frames over the same WebSocket client) */
  proto: 'json' | 'sio';
  localAddresses: string[];
  /** the WebSocket client: `lean` (leanClient.ts, the default) or `ws` (the library) */
  client: 'lean' | 'ws';
  joinRate: number;
  cursorRate: number;
  holdSeconds: number;
}
/** What the worker needs of a client socket (`ws` and LeanWebSocket both number readyState 0-3, OPEN = 1). */
interface ClientSocket {
  readyState: number;
  send(text: string): void;
  close(code: number): void;
}
interface Conn {
  ws: ClientSocket;
  lesson: number;
  node: number;
  startedAt: number;
  /** the lesson's first connection (its lesson opens on the node with it) */
  first: boolean;
  welcomeAt?: number;
  closeAt?: number;
  closing: boolean;
  /** the server answered the upgrade with an HTTP status (503: a full node) instead of 101 */
  refused?: boolean;
}

let init: Init;
const conns: Conn[] = [];
const byLesson: Conn[][] = [];
/** per server node: join and fan-out latency (the fan-out by the receiver's node), errors */
let joinHist: Histogram[] = [];
/** the same for the lessons' first arrivals only */
let joinFirstHist: Histogram[] = [];
let fanoutHist: Histogram[] = [];
let errors: Record<string, number>[] = [];
const sendTimes = new Map<number, number>();
let received = 0;
let expected = 0;
const err = (node: number, k: string) => (errors[node][k] = (errors[node][k] ?? 0) + 1);
const send = (m: unknown) => process.send!(m);
const sparse = (hs: Histogram[]) => hs.map((h) => h.toSparse());

/** A frame of our protocol, from the wire: JSON, or a Socket.IO event `42["message",{...}]` (answering Engine.IO's open and pings). */
function decode(c: Conn, text: string): { type: string; x?: number; code?: string } | undefined {
  if (init.proto === 'json') return JSON.parse(text);
  if (text.startsWith('42')) return (JSON.parse(text.slice(2)) as [string, { type: string }])[1];
  if (text === '2') c.ws.send('3'); // Engine.IO ping -> pong
  else if (text[0] === '0') c.ws.send('40'); // Engine.IO open -> connect to the main namespace
  return undefined;
}
const encode = (frame: string) => (init.proto === 'json' ? frame : `42["message",${frame}]`);

function open(lesson: number, url: string, node: number, addr: string, first = false): Conn {
  const c = { lesson, node, startedAt: performance.now(), first, closing: false } as Conn;
  const on: LeanHandlers = {
    message(text) {
      const now = performance.now();
      const m = decode(c, text);
      if (!m) return;
      if (m.type === 'cursor') {
        const t = sendTimes.get(m.x!);
        if (t !== undefined) {
          fanoutHist[node].record(now - t);
          received++;
        }
      } else if (m.type === 'welcome') {
        c.welcomeAt = now;
        joinHist[node].record(now - c.startedAt);
        if (c.first) joinFirstHist[node].record(now - c.startedAt);
      } else if (m.type === 'error') {
        err(node, `error:${m.code}`);
      }
    },
    // a refused upgrade is counted once, by its status: nothing that follows (the request's end,
    // an error, a close) is an unexpected close
    refused(status) {
      c.refused = true;
      c.closing = true;
      err(node, `upgrade:${status}`);
    },
    error(e) {
      if (!c.refused) err(node, `socket error${e.code ? ` ${e.code}` : ''}`);
    },
    close(code) {
      if (!c.closing) err(node, `closed:${code}${c.welcomeAt === undefined ? ' before welcome' : ''}`);
    },
  };
  c.ws = init.client === 'ws' ? wsClient(url, addr, on) : new LeanWebSocket(url, addr, on);
  return c;
}

/** The `ws` library's client (`--client ws`) behind the same handlers. */
function wsClient(url: string, addr: string, on: LeanHandlers): ClientSocket {
  const ws = new WebSocket(url, { localAddress: addr, perMessageDeflate: false });
  ws.on('message', (data) => on.message(data.toString()));
  // ws leaves a refused upgrade to this listener: end it here
  ws.on('unexpected-response', (req, res) => {
    on.refused(res.statusCode ?? 0);
    res.resume();
    req.destroy();
  });
  ws.on('error', (e: NodeJS.ErrnoException) => on.error(e));
  ws.on('close', (code) => on.close(code));
  return ws;
}

/** Runs `total` actions spread evenly at `rate` per second. */
function paced(total: number, rate: number, act: (i: number) => void): Promise<void> {
  return new Promise((resolve) => {
    if (total === 0) return resolve();
    const t0 = performance.now();
    let done = 0;
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
      while (done < due) act(done++);
      if (done >= total) {
        clearInterval(timer);
        resolve();
      }
    }, 5);
  });
}

async function join(): Promise<void> {
  const order: [number, number][] = [];
  init.lessons.forEach((l, i) => l.urls.forEach((_, k) => order.push([i, k])));
  // interleave lessons so every lesson fills gradually, as in real life
  order.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
  init.lessons.forEach((_, i) => (byLesson[i] = []));
  await paced(order.length, init.joinRate, (i) => {
    const [lesson, k] = order[i];
    const c = open(lesson, init.lessons[lesson].urls[k], init.lessons[lesson].nodes[k], init.localAddresses[i % init.localAddresses.length], k === 0);
    conns.push(c);
    byLesson[lesson].push(c);
  });
  const deadline = performance.now() + 30_000;
  while (conns.some((c) => c.welcomeAt === undefined && !c.refused && c.ws.readyState <= OPEN) && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const held = new Array<number>(init.nodeCount).fill(0);
  for (const c of conns) if (c.welcomeAt !== undefined && c.ws.readyState === OPEN) held[c.node]++;
  send({ ev: 'joined', held, join: sparse(joinHist), joinFirst: sparse(joinFirstHist), errors });
}

/** Connections still open and welcomed, per node (after the idle hold: none should have gone). */
function count(): void {
  const held = new Array<number>(init.nodeCount).fill(0);
  for (const c of conns) if (c.welcomeAt !== undefined && c.ws.readyState === OPEN) held[c.node]++;
  send({ ev: 'counted', held, errors });
}

async function cursor(): Promise<void> {
  const live = byLesson.map((l) => l.filter((c) => c.welcomeAt !== undefined && c.ws.readyState === OPEN)).filter((l) => l.length >= 2);
  let x = 0;
  // a worker whose lessons all lost their people (a server that dropped them) has nobody to send from
  const total = live.length > 0 ? Math.round(init.cursorRate * init.holdSeconds) : 0;
  await paced(total, init.cursorRate, () => {
    const lesson = live[Math.floor(Math.random() * live.length)];
    const sender = lesson[Math.floor(Math.random() * lesson.length)];
    const id = ++x;
    sendTimes.set(id, performance.now());
    sender.ws.send(encode(`{"type":"cursor","x":${id},"y":${Math.floor(Math.random() * 1000)}}`));
    expected += lesson.length - 1;
  });
  // Drain: wait (bounded) until every relayed copy arrived, so the server's CPU
  // for this phase covers all the work the messages caused, even when it lags.
  const drainUntil = performance.now() + 30_000;
  await new Promise((r) => setTimeout(r, 500));
  while (received < expected && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 100));
  send({ ev: 'cursored', sent: total, expected, received, fanout: sparse(fanoutHist), errors });
}

async function close(): Promise<void> {
  const lessons = byLesson.map((l) => l.filter((c) => c.welcomeAt !== undefined));
  await paced(lessons.length, Math.max(1, init.joinRate / Math.max(1, conns.length / Math.max(1, lessons.length))), (i) => {
    for (const c of lessons[i]) {
      c.closing = true;
      c.closeAt = performance.now();
      c.ws.close(1000);
    }
  });
  for (const c of conns) c.closing = true;
  await new Promise((r) => setTimeout(r, 500));
  const together: Record<string, number> = {};
  const togetherFromRequest: Record<string, number> = {};
  const spans: Record<string, [number, number]> = {};
  lessons.forEach((l, i) => {
    together[init.lessons[i].id] = togetherSeconds(l, (c) => c.welcomeAt!);
    togetherFromRequest[init.lessons[i].id] = togetherSeconds(l, (c) => c.startedAt);
    const w = l.map((c) => c.welcomeAt!).sort((x, y) => x - y);
    const c = l.map((c) => c.closeAt!).sort((x, y) => x - y);
    if (w.length >= 2) spans[init.lessons[i].id] = [performance.timeOrigin + w[1], performance.timeOrigin + c[c.length - 2]];
  });
  send({ ev: 'closed', together, togetherFromRequest, spans, errors });
}

/**
 * Seconds during which two or more of the lesson's connections were in
 * (entered .. close). A participant is in once their welcome arrived; under
 * load the server registered them up to one join latency earlier (when they
 * had only sent the upgrade), so the truth lies between the two measures.
 */
function togetherSeconds(l: Conn[], entered: (c: Conn) => number): number {
  const ev: [number, number][] = [];
  for (const c of l) if (c.welcomeAt !== undefined && c.closeAt !== undefined) ev.push([entered(c), 1], [c.closeAt, -1]);
  ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let n = 0;
  let since = 0;
  let total = 0;
  for (const [t, d] of ev) {
    if (n >= 2 && n + d < 2) total += t - since;
    if (n < 2 && n + d >= 2) since = t;
    n += d;
  }
  return total / 1000;
}

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'init') {
    init = m as Init;
    joinHist = Array.from({ length: init.nodeCount }, () => new Histogram());
    joinFirstHist = Array.from({ length: init.nodeCount }, () => new Histogram());
    fanoutHist = Array.from({ length: init.nodeCount }, () => new Histogram());
    errors = Array.from({ length: init.nodeCount }, () => ({}));
    send({ ev: 'ready' });
  } else if (m.cmd === 'join') void join();
  else if (m.cmd === 'count') count();
  else if (m.cmd === 'cursor') void cursor();
  else if (m.cmd === 'close') void close();
  else if (m.cmd === 'exit') process.exit(0);
});
