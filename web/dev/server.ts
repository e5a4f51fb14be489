/**
 * A small stand-in gateway for developing and testing the participant page
 * before the real gateway (realtime/) serves it. It speaks the lesson protocol
 * of docs/board-protocol.md with the real link lookup and the real
 * BoardService, and shows the wiring phase which hook goes where. It is not
 * the gateway: no presence across nodes, no metering, no limits beyond the
 * schemas, and removal is remembered in memory only.
 *
 *   npx tsx web/dev/server.ts            (uses DATABASE_URL / REDIS_URL; prints a teacher and a student link)
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocketServer, type WebSocket } from 'ws';
import { BoardOpError } from '../../src/board/errors.js';
import { ClientMessageSchema, type Participant } from '../../src/board/protocol.js';
import { BoardService } from '../../src/board/service.js';
import type { Deps } from '../../src/deps.js';
import { resolveLinkToken, type ResolvedLink } from '../../src/domain/links.js';
import { randomBase62 } from '../../src/lib/crypto.js';

const DEFAULT_WEB = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'web');
const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css', '.woff2': 'font/woff2', '.woff': 'font/woff', '.ttf': 'font/ttf', '.map': 'application/json', '.html': 'text/html; charset=utf-8', '.txt': 'text/plain' };

interface Client {
  ws: WebSocket;
  link: ResolvedLink;
  me: Participant;
  leave: () => void;
}

export interface DevServer {
  port: number;
  board: BoardService;
  /** drops every socket as a network cut would, refusing new ones for `outageMs` (the pages reconnect by themselves) */
  dropAll: (outageMs?: number) => void;
  close: () => Promise<void>;
}

export async function startDevServer(deps: Deps, port = 0, WEB = DEFAULT_WEB): Promise<DevServer> {
  const board = new BoardService(deps);
  const lessons = new Map<string, Set<Client>>();
  const removed = new Set<string>(); // link ids removed by a teacher

  /** unknown / expired / archived / removed, or the link when it may enter */
  async function check(token: string): Promise<ResolvedLink | 'unknown' | 'expired' | 'archived' | 'removed'> {
    const link = await resolveLinkToken(deps.sql, token);
    if (!link) return 'unknown';
    if (link.archived) return 'archived';
    if (link.expires_at <= deps.clock.now()) return 'expired';
    if (removed.has(link.link_id)) return 'removed';
    return link;
  }

  async function serveFile(res: ServerResponse, file: string, status = 200, cache = 'public, max-age=31536000, immutable') {
    const full = path.resolve(WEB, file);
    if (!full.startsWith(WEB) || !(await stat(full).catch(() => null))?.isFile()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(status, { 'content-type': TYPES[path.extname(full)] ?? 'application/octet-stream', 'cache-control': cache, 'x-content-type-options': 'nosniff' });
    res.end(await readFile(full));
  }

  async function onHttp(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname.startsWith('/web/assets/')) return serveFile(res, path.join('assets', url.pathname.slice('/web/assets/'.length)));
    const m = /^\/embed\/([^/]+)$/.exec(url.pathname);
    if (!m) return void res.writeHead(404).end('not found');
    const r = await check(decodeURIComponent(m[1]));
    if (typeof r === 'string') return serveFile(res, `errors/${r}.html`, r === 'archived' ? 410 : r === 'removed' ? 403 : 401, 'no-store');
    return serveFile(res, 'index.html', 200, 'no-store');
  }

  const send = (c: Client, msg: object) => c.ws.readyState === c.ws.OPEN && c.ws.send(JSON.stringify(msg));
  const others = (c: Client) => [...(lessons.get(c.link.lesson_id) ?? [])].filter((o) => o !== c);

  async function onSocket(ws: WebSocket, link: ResolvedLink) {
    const me: Participant = { id: link.link_id, name: link.name, role: link.role, camera: false, mic: false };
    const client: Client = { ws, link, me, leave: () => {} };
    const room = lessons.get(link.lesson_id) ?? new Set<Client>();
    lessons.set(link.lesson_id, room);
    // The hook the gateway needs: relay committed ops to this socket in seq order. The socket's own
    // ops (origin "<connection>|<ref>") become board.ack at their place in the order, so the client
    // never sees a later seq before the ack of an earlier one.
    const mark = `${me.id}|`;
    const sub = await board.join(link.lesson_id, {
      ops: (ops) => {
        let theirs: { seq: number; op: unknown }[] = [];
        for (const o of ops) {
          if (!o.origin?.startsWith(mark)) {
            theirs.push({ seq: o.seq, op: o.op });
            continue;
          }
          if (theirs.length) send(client, { type: 'board.ops', ops: theirs });
          theirs = [];
          send(client, { type: 'board.ack', ref: o.origin.slice(mark.length), seq: o.seq });
        }
        if (theirs.length) send(client, { type: 'board.ops', ops: theirs });
      },
      reset: (seq) => send(client, { type: 'board.resync', seq }),
    });
    client.leave = sub.leave;
    room.add(client);
    // welcome and presence have the gateway's shapes (docs/protocol.md); the board feature adds ice_servers
    send(client, { type: 'welcome', protocol: 1, you: me, people: [...room].map((c) => c.me), lesson: { id: link.lesson_id, title: link.lesson_title, mode: link.lesson_mode, subject_mode: link.subject_mode }, ice_servers: deps.config.ICE_SERVERS });
    for (const o of others(client)) send(o, { type: 'presence', event: 'joined', person: me, count: room.size });

    ws.on('message', async (data) => {
      let parsed;
      try {
        parsed = ClientMessageSchema.safeParse(JSON.parse(String(data)));
      } catch {
        return send(client, { type: 'error', code: 'bad_json', message: 'messages are JSON text frames' });
      }
      if (!parsed.success) return send(client, { type: 'error', code: 'invalid', message: parsed.error.issues[0]?.message ?? 'invalid message' });
      const msg = parsed.data;
      switch (msg.type) {
        case 'board.op':
          try {
            const ack = await board.submit(link.lesson_id, msg.op, { role: me.role }, `${me.id}|${msg.ref}`);
            // applied ops were acked in order by the listener above; only "nothing to apply" is acked here
            if (ack.seq === null) send(client, { type: 'board.ack', ref: msg.ref, seq: null });
          } catch (err) {
            const e = err instanceof BoardOpError ? err : new BoardOpError('unavailable', 'try again');
            send(client, { type: 'board.reject', ref: msg.ref, code: e.code, message: e.message });
          }
          return;
        case 'board.sync': {
          const r = await board.read(link.lesson_id, msg.since);
          return send(client, { type: 'board.state', seq: r.head.seq, full: r.full, pages: r.head.pages, pinned_page_id: r.head.pinned_page_id, elements: r.elements, deleted_ids: r.deleted_ids });
        }
        case 'chat.send': {
          const line = { type: 'chat', id: randomBase62(12), from: { id: me.id, name: me.name, role: me.role }, text: msg.text, at: deps.clock.now().toISOString() };
          for (const c of room) send(c, line);
          return;
        }
        case 'rtc.offer':
        case 'rtc.answer':
        case 'rtc.ice': {
          if (link.lesson_mode !== 'full') return send(client, { type: 'error', code: 'board_only', message: 'this lesson has no video call' });
          const { to, type: _t, ...rest } = msg;
          const target = others(client).find((c) => c.me.id === to);
          if (target) send(target, { type: msg.type, from: me.id, ...rest });
          return;
        }
        case 'media.state':
          me.camera = msg.camera;
          me.mic = msg.mic;
          for (const c of room) send(c, { type: 'media.state', participant_id: me.id, camera: me.camera, mic: me.mic });
          return;
        case 'teacher.mute':
        case 'teacher.remove': {
          if (me.role !== 'teacher') return send(client, { type: 'error', code: 'forbidden', message: 'only a teacher can do that' });
          const target = others(client).find((c) => c.me.id === msg.participant_id);
          if (!target) return;
          if (msg.type === 'teacher.mute') return send(target, { type: 'muted', camera: msg.camera, mic: msg.mic, by: me.name });
          removed.add(target.link.link_id);
          target.ws.close(4403, 'removed by the teacher');
          return;
        }
      }
    });
    ws.on('close', () => {
      room.delete(client);
      client.leave();
      for (const o of room) send(o, { type: 'presence', event: 'left', person: me, count: room.size });
    });
  }

  const http = createServer((req, res) => void onHttp(req, res).catch(() => res.writeHead(500).end()));
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });
  let outageUntil = 0;
  http.on('upgrade', (req, socket, head) => {
    if (Date.now() < outageUntil) return void socket.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    const token = new URL(req.url ?? '/', 'http://x').searchParams.get('token') ?? '';
    void check(token).then((r) => {
      if (typeof r === 'string') {
        const status = r === 'archived' ? '410 Gone' : r === 'removed' ? '403 Forbidden' : '401 Unauthorized';
        socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => void onSocket(ws, r));
    });
  });
  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve));
  const actual = (http.address() as { port: number }).port;
  return {
    port: actual,
    board,
    dropAll: (outageMs = 0) => {
      outageUntil = Date.now() + outageMs;
      for (const c of wss.clients) c.terminate();
    },
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((r) => http.close(() => r()));
      http.closeAllConnections();
      await board.close();
    },
  };
}

// Run directly: a dev server with a fresh partner, a lesson and two links.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { loadConfig } = await import('../../src/config.js');
  const { createSql } = await import('../../src/db/index.js');
  const { createRedis } = await import('../../src/redis.js');
  const { createLogger } = await import('../../src/logger.js');
  const { migrate } = await import('../../src/db/migrate.js');
  const { createPartner } = await import('../../src/domain/partners.js');
  const { topUp } = await import('../../src/domain/ledger.js');
  const { createLesson } = await import('../../src/domain/lessons.js');
  const { issueLink } = await import('../../src/domain/links.js');
  const { systemClock } = await import('../../src/lib/clock.js');
  const config = loadConfig();
  await migrate(config.DATABASE_URL);
  const deps: Deps = { config, sql: createSql(config.DATABASE_URL), redis: createRedis(config.REDIS_URL, config.REDIS_KEY_PREFIX), clock: systemClock, log: createLogger(config.LOG_LEVEL) };
  const srv = await startDevServer(deps, Number(process.env.PORT ?? 8090));
  const partner = await createPartner(deps.sql, { name: 'dev' });
  await topUp(deps.sql, { partnerId: partner.id, minutes: 60, at: new Date() });
  const lesson = await createLesson(deps.sql, partner, { title: 'Dev lesson', subject_mode: (process.env.SUBJECT as 'math') ?? 'math', mode: 'full' }, new Date());
  const base = `http://127.0.0.1:${srv.port}`;
  for (const [id, name, role] of [['t', 'Anna (teacher)', 'teacher'], ['s', 'Boris', 'student']] as const) {
    const l = await issueLink(deps.sql, { partner, lesson, input: { user: { id, name, role }, ttl_minutes: 180 }, embedBaseUrl: base, at: new Date() });
    console.log(`${role}: ${l.url}`);
  }
}
