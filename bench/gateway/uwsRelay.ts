import uWS from 'uWebSockets.js';
import './probeSignal.js';

/**
 * A second reference point for the load test: the ws baseline's protocol on
 * bare uWebSockets.js (topics, no token check, no Redis, no metering, no zod).
 * The gateway cannot be cheaper per message than this; the distance between
 * the two is what our own logic costs (docs/benchmarks.md).
 *
 * Usage: tsx bench/gateway/uwsRelay.ts -> prints {"port": N} when listening.
 * UWS_RELAY_IDLE_TIMEOUT (seconds, default 20): uWS pings a silent socket
 * after idleTimeout minus its margin (12 s at 20; 4 s at 8, uWS's own
 * sendPingsAutomatically), so 8 gives about the gateway's 5-second liveness
 * cycle: the floor of what holding sockets that closely costs.
 */
interface Ud {
  lesson: string;
  id: string;
}
const app = uWS.App();
const members = new Map<string, Set<string>>();
app.ws<Ud>('/ws', {
  maxPayloadLength: 65_536,
  idleTimeout: Number(process.env.UWS_RELAY_IDLE_TIMEOUT ?? 20),
  upgrade(res, req, ctx) {
    const lesson = req.getQuery('lesson') ?? '';
    const id = (req.getQuery('token') ?? '').slice(0, 16);
    res.upgrade({ lesson, id }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), ctx);
  },
  open(ws) {
    const { lesson, id } = ws.getUserData();
    let set = members.get(lesson);
    if (!set) members.set(lesson, (set = new Set()));
    ws.send(JSON.stringify({ type: 'welcome', you: { id }, people: [...set].map((p) => ({ id: p })) }));
    set.add(id);
    ws.subscribe(lesson);
    ws.publish(lesson, JSON.stringify({ type: 'presence', event: 'joined', person: { id } }));
  },
  message(ws, data, isBinary) {
    if (isBinary) return;
    let msg: { type?: unknown; x?: unknown; y?: unknown };
    try {
      msg = JSON.parse(Buffer.from(data).toString());
    } catch {
      return;
    }
    if (msg.type !== 'cursor' || typeof msg.x !== 'number' || typeof msg.y !== 'number') return;
    const { lesson, id } = ws.getUserData();
    ws.publish(lesson, JSON.stringify({ type: 'cursor', from: id, x: msg.x, y: msg.y }));
  },
  close(ws) {
    const { lesson, id } = ws.getUserData();
    members.get(lesson)?.delete(id);
    app.publish(lesson, JSON.stringify({ type: 'presence', event: 'left', person: { id } }));
  },
});
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (s) => {
  if (s) process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(s) })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
