import { createServer, type Server } from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { createSql, type Sql } from '../../src/db/index.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner } from '../../src/domain/partners.js';
import type { Cluster } from './cluster.js';

/**
 * What a scenario measures, from the outside: participants (WebSocket clients
 * that note when they were really in: welcome to close, on their own clock),
 * lessons of two participants each, and a webhook receiver that counts every
 * request per event id. `report` sets truth against the billing and the events
 * recorded against those delivered.
 */

/** A webhook receiver over http (WEBHOOK_ALLOW_HOSTS=127.0.0.1). */
export class Receiver {
  readonly perEvent = new Map<number, number>();
  requests = 0;
  /** answer this long after the request arrived (attempts stay in flight while a fault hits) */
  delayMs = 0;
  private server!: Server;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = Number(req.headers['x-whiteboard-delivery']);
        this.requests++;
        this.perEvent.set(id, (this.perEvent.get(id) ?? 0) + 1);
        setTimeout(() => res.writeHead(200).end('ok'), this.delayMs);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/**
 * A participant's socket, optionally through a loopback TCP proxy that can go
 * silent both ways without closing anything: a half-open connection, as when a
 * laptop's lid closes or a NAT forgets the flow.
 */
export class Participant {
  ws!: WebSocket;
  /** when the upgrade request went out: the person may be counted in from here (the welcome follows the server's checks) */
  requestedAt: number | null = null;
  welcomeAt: number | null = null;
  leftAt: number | null = null;
  private proxy: net.Server | null = null;
  private silent = false;

  constructor(readonly lesson: string, private readonly url: string) {}

  async join(opts: { viaProxy?: boolean } = {}): Promise<void> {
    let url = this.url;
    if (opts.viaProxy) {
      const target = new URL(url);
      this.proxy = net.createServer((client) => {
        const up = net.connect(Number(target.port), target.hostname);
        client.on('data', (d) => !this.silent && up.write(d));
        up.on('data', (d) => !this.silent && client.write(d));
        const end = () => (client.destroy(), up.destroy());
        client.on('error', end).on('close', end);
        up.on('error', end).on('close', end);
      });
      await new Promise<void>((r) => this.proxy!.listen(0, '127.0.0.1', r));
      const via = new URL(url);
      via.port = String((this.proxy.address() as net.AddressInfo).port);
      url = via.toString();
    }
    this.requestedAt = Date.now();
    // an attempt that failed is over: its socket is gone, and nothing it hears counts any more
    this.leftAt = null;
    const ws = (this.ws = new WebSocket(url, { perMessageDeflate: false }));
    ws.on('error', () => {});
    ws.on('close', () => {
      if (ws === this.ws) this.leftAt ??= Date.now();
    });
    await new Promise<void>((resolve, reject) => {
      let welcomed = false;
      const fail = (err: Error) => {
        if (welcomed) return;
        clearTimeout(t);
        ws.removeAllListeners('message');
        ws.removeAllListeners('close');
        ws.terminate();
        reject(err);
      };
      const t = setTimeout(() => fail(new Error('no welcome within 15 s')), 15_000);
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as { type: string };
        if (m.type === 'welcome' && this.welcomeAt === null) {
          this.welcomeAt = Date.now();
          welcomed = true;
          clearTimeout(t);
          resolve();
        }
      });
      ws.once('close', () => fail(new Error('closed before welcome')));
    });
  }

  /** Leaves properly (close frame). */
  leave(): void {
    if (this.leftAt === null) this.leftAt = Date.now();
    this.ws.close();
  }

  /** Stops every byte both ways; the person is gone from this moment (truth), the server is not told. */
  goSilent(): void {
    this.silent = true;
    this.leftAt ??= Date.now();
  }

  /** The connection dropped under it (its gateway died): the person is gone from then. */
  get connected(): boolean {
    return this.leftAt === null;
  }

  dispose(): void {
    this.ws.terminate();
    this.proxy?.close();
  }
}

export interface Lesson {
  id: string;
  key: string;
  people: Participant[];
}

export class World {
  readonly receiver = new Receiver();
  readonly lessons: Lesson[] = [];
  sql!: Sql;
  private keys: string[] = [];
  private partnerIds: string[] = [];

  constructor(private readonly cluster: Cluster) {}

  get apiBase(): string {
    return `http://127.0.0.1:${this.cluster.port('api')}/api/partner/v1`;
  }

  async setup(partners = 2): Promise<void> {
    this.sql = createSql(this.cluster.dbUrl, { max: 2, name: 'chaos-driver' });
    await this.receiver.start();
    for (let i = 0; i < partners; i++) {
      const p = await createPartner(this.sql, { name: `chaos ${i}` });
      await topUp(this.sql, { partnerId: p.id, minutes: 100_000, at: new Date() });
      const key = (await createApiKey(this.sql, p.id)).apiKey;
      this.keys.push(key);
      this.partnerIds.push(p.id);
      await this.call('PUT', '/webhook', key, { url: `http://127.0.0.1:${this.receiver.port}/hook` }, 200);
    }
  }

  async call(method: string, path: string, key: string, body: unknown, want: number): Promise<any> {
    for (let i = 0; ; i++) {
      const res = await fetch(this.apiBase + path, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).catch((e: Error) => ({ status: 0, text: async () => e.message, json: async () => null }));
      if (res.status === want) return res.json();
      // the API may answer 5xx while its backends are being killed: setup retries, a scenario counts
      if (i >= 20) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** `n` lessons of two participants each, spread over the partners; participant k of each lesson on gateway k. */
  async lessonsOnGateways(n: number, gateways: ('gw1' | 'gw2')[] = ['gw1', 'gw2']): Promise<Lesson[]> {
    const made: Lesson[] = [];
    for (let i = 0; i < n; i++) {
      const key = this.keys[i % this.keys.length];
      const lesson = await this.call('POST', '/lessons', key, { title: `Chaos ${this.lessons.length}` }, 201);
      const people: Participant[] = [];
      for (let k = 0; k < 2; k++) {
        const link = await this.call('POST', `/lessons/${lesson.id}/links`, key, { user: { id: `u${this.lessons.length}-${k}`, name: `P${k}`, role: k === 0 ? 'teacher' : 'student' }, ttl_minutes: 600 }, 201);
        const gw = gateways[k % gateways.length];
        people.push(new Participant(lesson.id, `ws://127.0.0.1:${this.cluster.port(gw)}/ws?token=${link.token}`));
      }
      const l = { id: lesson.id, key, people };
      this.lessons.push(l);
      made.push(l);
    }
    return made;
  }

  /**
   * Seconds both participants of a lesson were really in (their own timestamps):
   * from the later welcome, or (`fromRequest`, the upper bound) from the later
   * upgrade request; the server counts a person in somewhere between the two.
   */
  truth(l: Lesson, fromRequest = false, now = Date.now()): number {
    const from = Math.max(...l.people.map((p) => (fromRequest ? p.requestedAt : p.welcomeAt) ?? Infinity));
    const to = Math.min(...l.people.map((p) => p.leftAt ?? now));
    return Math.max(0, (to - from) / 1000);
  }

  async billed(l: Lesson): Promise<number> {
    const body = await this.call('GET', `/lessons/${l.id}`, l.key, undefined, 200);
    return body.billed_seconds as number;
  }

  /** Events recorded for our partners (the outbox) of the types their webhooks receive, and what the receiver got. */
  async events(): Promise<{ expected: number; delivered: number; missing: number; duplicates: number; maxPerEvent: number }> {
    const rows = await this.sql<{ id: number }[]>`
      SELECT e.id FROM events e JOIN webhooks w ON w.partner_id = e.partner_id
      WHERE e.partner_id IN ${this.sql(this.partnerIds)} AND (e.type = 'webhook.test' OR e.type = ANY(w.enabled_events))`;
    const got = this.receiver.perEvent;
    const delivered = rows.filter((r) => got.has(r.id)).length;
    let duplicates = 0;
    let maxPerEvent = 0;
    for (const n of got.values()) {
      duplicates += n - 1;
      maxPerEvent = Math.max(maxPerEvent, n);
    }
    return { expected: rows.length, delivered, missing: rows.length - delivered, duplicates, maxPerEvent };
  }

  /** The recorded events the receiver has not got, with their delivery's state: what a failure needs to be understood. */
  async undelivered(): Promise<string[]> {
    const got = this.receiver.perEvent;
    const rows = await this.sql<{ id: number; type: string; created_at: Date; state: string | null; attempts: number | null; next_attempt_at: Date | null; claimed_by: number | null; claimed_at: Date | null; tried: number }[]>`
      SELECT e.id, e.type, e.created_at, d.state, d.attempts, d.next_attempt_at, d.claimed_by, d.claimed_at,
             (SELECT count(*)::int FROM webhook_attempts a WHERE a.event_id = e.id) AS tried
      FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id
      WHERE e.partner_id IN ${this.sql(this.partnerIds)} ORDER BY e.id`;
    const iso = (d: Date | null) => (d ? d.toISOString().slice(11, 23) : '-');
    return rows
      .filter((r) => !got.has(r.id))
      .map((r) => `event ${r.id} ${r.type} at ${iso(r.created_at)}: delivery ${r.state ?? 'none'}, ${r.attempts ?? 0} attempts (${r.tried} logged), next ${iso(r.next_attempt_at)}, claimed by ${r.claimed_by ?? '-'} at ${iso(r.claimed_at)}; now ${iso(new Date())}`);
  }

  /**
   * Waits until every recorded event reached the receiver, or `ms` passed; says how long it took
   * (a note of the scenario's: a slow delivery is seen as slow, a lost one as missing).
   */
  async waitDelivered(ms: number): Promise<string> {
    const started = Date.now();
    for (;;) {
      const e = await this.events();
      if (e.missing === 0) return `every event delivered ${Date.now() - started} ms after the checks began waiting`;
      if (Date.now() - started >= ms) return `${e.missing} of ${e.expected} events not delivered after ${ms} ms`;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async close(): Promise<void> {
    for (const l of this.lessons) for (const p of l.people) p.dispose();
    await this.receiver.close();
    await this.sql?.end({ timeout: 1 });
  }
}
