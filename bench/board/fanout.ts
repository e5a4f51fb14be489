/**
 * Fan-out through the real gateway (bench/board/run.ts calls it): a gateway
 * process (src/main.ts, ROLES=gateway, its default lesson features) on the
 * bench database, and `ws` clients in this process, all on 127.0.0.1.
 *
 * Fan-out latency: from a drawer's `send` of a board.op to each other
 * participant's receipt of the board.ops frame carrying it (same process, one
 * clock); it includes validation, the Postgres commit (the gateway relays
 * only durable operations), the relay and both sockets. Ack latency: send to
 * the drawer's board.ack. Gateway CPU: utime+stime of the gateway process
 * (/proc/<pid>/stat) over the drawing window, per 1,000 operations submitted.
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import type { Deps } from '../../src/deps.js';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import type { Partner } from '../../src/domain/partners.js';
import { handwritingPage } from './pages.js';
import { cpuSeconds, logPort, spawnUntilPort } from '../lib/service.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface GatewayProc {
  proc: ChildProcess;
  port: number;
  /** CPU seconds (user + system) the process used so far */
  cpu(): number;
  stop(): Promise<void>;
}

export async function spawnGateway(env: Record<string, string>): Promise<GatewayProc> {
  // BENCH_GATEWAY_NODE_ARGS: e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the gateway
  const nodeArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const { proc, port } = await spawnUntilPort(
    ['src/main.ts'],
    { ...env, ROLES: 'gateway', GATEWAY_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    logPort('gateway listening'),
    {
      cwd: ROOT,
      nodeArgs,
      timeoutMs: 60_000,
      onSpawn: (p) => {
        // never leave the gateway behind, whatever ends this process
        process.once('exit', () => p.kill('SIGKILL'));
        for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));
      },
      // the gateway's warnings and errors
      onLine: (line) => {
        if (line.startsWith('{') && /"level":(4|5|6)\d/.test(line)) process.stderr.write(`[gateway] ${line}\n`);
      },
    },
  );
  const exited = new Promise<void>((r) => (proc.exitCode !== null ? r() : proc.once('exit', () => r())));
  return {
    proc,
    port,
    cpu: () => cpuSeconds(proc.pid!),
    stop: async () => {
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      proc.kill('SIGKILL');
    },
  };
}

interface Client {
  ws: WebSocket;
  lessonIndex: number;
}

/** Opens `count` participant sockets with at most `parallel` handshakes at a time; resolves when all got welcome. */
async function connectAll(urls: { url: string; lesson: number }[], parallel: number, onMessage: (c: Client, data: string) => void): Promise<Client[]> {
  const out: Client[] = new Array(urls.length);
  let next = 0;
  const worker = async () => {
    while (next < urls.length) {
      const i = next++;
      const ws = new WebSocket(urls[i].url, { perMessageDeflate: false });
      const c: Client = { ws, lessonIndex: urls[i].lesson };
      await new Promise<void>((resolve, reject) => {
        ws.once('error', reject);
        // a connection the gateway closes before welcome must end the run, not hang it
        ws.once('close', (code, reason) => reject(new Error(`participant ${i} closed before welcome: ${code} ${reason.toString()}`)));
        ws.on('message', (data) => {
          const text = data.toString();
          if (text.startsWith('{"type":"welcome"') || text.includes('"type":"welcome"')) resolve();
          onMessage(c, text);
        });
      });
      out[i] = c;
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return out;
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

export interface FanoutResult {
  ops: number;
  seconds: number;
  deliveries: number;
  fanout: number[];
  acks: number[];
  gatewayCpuSeconds: number;
  /** what the gateway would have spent in the same window with nobody drawing */
  idleCpuSeconds: number;
  rejected: number;
}

/**
 * `lessons` lessons of `people` participants each. In every lesson, `drawers`
 * people draw at a human rate: a stroke grows for ~1 s (an update every 80
 * ms, as the page sends while drawing, 5 more points each), then a pause of
 * `pauseMs` (±20 %). Runs `seconds`, bounded.
 */
export async function fanout(
  deps: Deps,
  partner: Partner,
  gw: GatewayProc,
  o: { lessons: number; people: number; drawers: number; seconds: number; pauseMs: number; label: string },
): Promise<FanoutResult> {
  const urls: { url: string; lesson: number }[] = [];
  for (let l = 0; l < o.lessons; l++) {
    const lesson = await createLesson(deps.sql, partner, { title: `${o.label} ${l}`, mode: 'board_only' }, new Date());
    for (let p = 0; p < o.people; p++) {
      const link = await issueLink(deps.sql, { partner, lesson, input: { user: { id: `u${p}`, name: `P${p}`, role: p === 0 ? 'teacher' : 'student' }, ttl_minutes: 60 }, embedBaseUrl: 'http://127.0.0.1', at: new Date() });
      urls.push({ url: `ws://127.0.0.1:${gw.port}/ws?token=${link.token}`, lesson: l });
    }
  }
  const sentAt = new Map<string, number>();
  const fan: number[] = [];
  const acks: number[] = [];
  let deliveries = 0;
  let rejected = 0;
  let measuring = false;
  const refSent = new Map<string, number>();

  const onMessage = (_c: Client, text: string) => {
    if (!measuring) return;
    const now = performance.now();
    if (text.startsWith('{"type":"board.ops"')) {
      const msg = JSON.parse(text) as { ops: { op: { elements?: { id: string; points: unknown[] }[] } }[] };
      for (const { op } of msg.ops) {
        const el = op.elements?.[0];
        const t = el && sentAt.get(`${el.id}:${el.points.length}`);
        if (t !== undefined) {
          fan.push(now - t);
          deliveries++;
        }
      }
    } else if (text.startsWith('{"type":"board.ack"')) {
      const m = JSON.parse(text) as { ref: string };
      const t = refSent.get(m.ref);
      if (t !== undefined) {
        acks.push(now - t);
        refSent.delete(m.ref);
      }
    } else if (text.startsWith('{"type":"board.reject"')) {
      rejected++;
    }
  };

  const t0 = performance.now();
  const clients = await connectAll(urls, 32, onMessage);
  console.log(`  ${clients.length} participants connected in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await new Promise((r) => setTimeout(r, 2000));
  // what the gateway spends with everyone connected and nobody drawing (presence, metering, pings)
  const idle0 = gw.cpu();
  const idleT = performance.now();
  await new Promise((r) => setTimeout(r, 5000));
  const idleCpuPerSecond = (gw.cpu() - idle0) / ((performance.now() - idleT) / 1000);

  const byLesson = new Map<number, Client[]>();
  for (const c of clients) byLesson.set(c.lessonIndex, [...(byLesson.get(c.lessonIndex) ?? []), c]);
  const template = handwritingPage(1)[0];
  let ops = 0;
  let refN = 0;
  measuring = true;
  const cpu0 = gw.cpu();
  const start = performance.now();
  const end = Date.now() + o.seconds * 1000;
  const drawer = async (c: Client, lesson: number, who: number) => {
    // start at a random moment, so lessons do not draw in lockstep
    await new Promise((r) => setTimeout(r, Math.random() * (o.pauseMs + 1000)));
    let k = 0;
    while (Date.now() < end) {
      const id = `l${lesson}p${who}s${k++}`;
      const pts: [number, number][] = [];
      for (let step = 0; step < 12 && Date.now() < end; step++) {
        for (let j = 0; j < 5; j++) pts.push([pts.length * 2, Math.round(Math.sin(pts.length / 4) * 10)]);
        const el = { ...template, id, x: who * 50, y: k * 30, points: [...pts], version: step + 1 }; // each update a newer version, as the editor stamps it
        const ref = `r${refN++}`;
        const t = performance.now();
        sentAt.set(`${id}:${pts.length}`, t);
        refSent.set(ref, t);
        c.ws.send(JSON.stringify({ type: 'board.op', ref, op: { type: step === 0 ? 'element.add' : 'element.update', elements: [el] } }));
        ops++;
        await new Promise((r) => setTimeout(r, 80));
      }
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(o.pauseMs * (0.8 + Math.random() * 0.4), end - Date.now()))));
    }
  };
  await Promise.all([...byLesson.entries()].flatMap(([lesson, cs]) => cs.slice(0, o.drawers).map((c, who) => drawer(c, lesson, who))));
  const elapsed = (performance.now() - start) / 1000;
  await new Promise((r) => setTimeout(r, 1500)); // the last deliveries
  const gatewayCpuSeconds = gw.cpu() - cpu0;
  const window = (performance.now() - start) / 1000;
  measuring = false;
  await Promise.all(
    clients.map(
      (c) =>
        new Promise<void>((r) => {
          c.ws.once('close', () => r());
          c.ws.close(1000);
          setTimeout(r, 2000);
        }),
    ),
  );
  return { ops, seconds: elapsed, deliveries, fanout: fan, acks, gatewayCpuSeconds, idleCpuSeconds: idleCpuPerSecond * window, rejected };
}

export function report(r: FanoutResult, receiversPerOp: number): void {
  const ms = (v: number) => `${v.toFixed(1)} ms`.padStart(9);
  console.log(`  ${r.ops} operations in ${r.seconds.toFixed(1)} s (${(r.ops / r.seconds).toFixed(0)} ops/s), ${r.deliveries} deliveries (expected ${r.ops * receiversPerOp}), ${r.rejected} rejected`);
  console.log(`  fan-out send -> other participant  median ${ms(pct(r.fanout, 50))}  p90 ${ms(pct(r.fanout, 90))}  p99 ${ms(pct(r.fanout, 99))}`);
  console.log(`  ack     send -> durable board.ack  median ${ms(pct(r.acks, 50))}  p90 ${ms(pct(r.acks, 90))}  p99 ${ms(pct(r.acks, 99))}`);
  const drawing = r.gatewayCpuSeconds - r.idleCpuSeconds;
  console.log(`  gateway process CPU: ${r.gatewayCpuSeconds.toFixed(2)} s = ${((r.gatewayCpuSeconds / r.ops) * 1000).toFixed(3)} s per 1,000 operations`);
  console.log(`    of which idle (everyone connected, nobody drawing: presence, metering, pings): ${r.idleCpuSeconds.toFixed(2)} s; drawing: ${((drawing / r.ops) * 1000).toFixed(3)} s per 1,000 operations`);
}
