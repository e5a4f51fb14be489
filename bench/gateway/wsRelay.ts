import { WebSocketServer, WebSocket } from 'ws';
import './probeSignal.js';

/**
 * The baseline of the load test: the same participant protocol (welcome,
 * presence, cursor relay with the sender's id) done the plain way with `ws`:
 * no token check, no Redis, no metering, no zod. It shows what the cursor
 * relay costs without our gateway; the gateway should need at most a third
 * of its CPU per message (docs/benchmarks.md).
 *
 * Usage: tsx bench/gateway/wsRelay.ts  -> prints {"port": N} when listening.
 * Clients connect to /ws?token=<t>&lesson=<lesson id>.
 */
const rooms = new Map<string, Set<WebSocket>>();
const ids = new WeakMap<WebSocket, string>();
const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0), perMessageDeflate: false, maxPayload: 65_536 });

wss.on('connection', (ws, req) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const lesson = url.searchParams.get('lesson') ?? '';
  const id = (url.searchParams.get('token') ?? '').slice(0, 16);
  ids.set(ws, id);
  let room = rooms.get(lesson);
  if (!room) rooms.set(lesson, (room = new Set()));
  ws.send(JSON.stringify({ type: 'welcome', you: { id }, people: [...room].map((o) => ({ id: ids.get(o) })) }));
  const joined = JSON.stringify({ type: 'presence', event: 'joined', person: { id } });
  for (const o of room) o.send(joined);
  room.add(ws);

  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    let msg: { type?: unknown; x?: unknown; y?: unknown };
    try {
      msg = JSON.parse(data.toString());
    } catch {
      return;
    }
    if (msg.type !== 'cursor' || typeof msg.x !== 'number' || typeof msg.y !== 'number') return;
    const frame = JSON.stringify({ type: 'cursor', from: id, x: msg.x, y: msg.y });
    for (const o of room!) if (o !== ws && o.readyState === WebSocket.OPEN) o.send(frame);
  });
  ws.on('close', () => {
    room!.delete(ws);
    if (room!.size === 0) rooms.delete(lesson);
    const left = JSON.stringify({ type: 'presence', event: 'left', person: { id } });
    for (const o of room!) o.send(left);
  });
});

wss.on('listening', () => {
  const addr = wss.address();
  process.stdout.write(`${JSON.stringify({ port: addr && typeof addr === 'object' ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => wss.close(() => process.exit(0)));
