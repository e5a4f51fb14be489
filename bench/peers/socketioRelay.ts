import { createServer } from 'node:http';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { Server } from 'socket.io';
import '../gateway/probeSignal.js';

/**
 * The peer users would pick instead of our gateway: Socket.IO with
 * @socket.io/redis-adapter, so several processes share rooms through one
 * Redis. The participant protocol of the other load-test relays (welcome with
 * the people present, presence joined/left, the cursor relayed with the
 * sender's id), done the Socket.IO way: a room per lesson, presence by room
 * membership (`fetchSockets()` across every node, which is how Socket.IO
 * answers "who is in this room"), every message one `message` event carrying
 * the same JSON object as the other relays. No token check, no metering.
 *
 * WebSocket transport only (no long-polling upgrade dance: the load test's
 * clients open the WebSocket directly, as socket.io-client does with
 * `transports: ['websocket']`), no compression, 64 KiB frames: the settings
 * of the gateway and of the other relays.
 *
 * Usage: REDIS_URL=... SIO_KEY=<channel prefix> tsx bench/peers/socketioRelay.ts
 *   -> prints {"port": N} when listening. Clients connect to
 *   /socket.io/?EIO=4&transport=websocket&token=<t>&lesson=<lesson id>.
 */
interface Data {
  lesson: string;
  id: string;
}
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const pub = new Redis(redisUrl);
const sub = pub.duplicate();
const http = createServer();
/** every message is one `message` event carrying the JSON object of the other relays */
type Events = { message: (m: Record<string, unknown>) => void };
const io = new Server<Events, Events, Record<string, never>, Data>(http, {
  transports: ['websocket'],
  perMessageDeflate: false,
  maxHttpBufferSize: 65_536,
  serveClient: false,
  // the gateway's keepalive: a ping every ~5 s, an answer within 20 s
  pingInterval: 5_000,
  pingTimeout: 15_000,
  adapter: createAdapter(pub, sub, { key: process.env.SIO_KEY ?? 'socket.io', requestsTimeout: 5_000 }),
});

io.on('connection', async (socket) => {
  const q = socket.handshake.query;
  const lesson = String(q.lesson ?? '');
  const id = String(q.token ?? '').slice(0, 16);
  socket.data = { lesson, id };
  socket.on('message', (msg: { type?: unknown; x?: unknown; y?: unknown }) => {
    if (!msg || msg.type !== 'cursor' || typeof msg.x !== 'number' || typeof msg.y !== 'number') return;
    socket.to(lesson).emit('message', { type: 'cursor', from: id, x: msg.x, y: msg.y });
  });
  socket.on('disconnect', () => {
    io.to(lesson).emit('message', { type: 'presence', event: 'left', person: { id } });
  });
  // who is in the lesson, on every node (the redis adapter asks the others and waits for their answers)
  const present = await io.in(lesson).fetchSockets();
  if (!socket.connected) return;
  socket.emit('message', { type: 'welcome', you: { id }, people: present.map((s) => ({ id: s.data.id })) });
  socket.to(lesson).emit('message', { type: 'presence', event: 'joined', person: { id } });
  socket.join(lesson);
});

http.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = http.address();
  process.stdout.write(`${JSON.stringify({ port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  void io.close().finally(() => {
    pub.disconnect();
    sub.disconnect();
    process.exit(0);
  });
});
