/**
 * The attacker of test/realtime/limitsAttack.test.ts, in a process of its
 * own so that its sockets' cost is not charged to the teacher's pings
 * measured in the test process. Opens `sockets` sockets of one link at once
 * and sends cursors on each at `rate` a second once it got `welcome`. Prints
 * "start" when it begins, "settled" once every socket got `welcome` or was
 * closed, and `ms` later one JSON line: {sent, open, closes: {code: count}}.
 *
 *   node --import tsx test/realtime/helpers/attacker.ts <ws url> <sockets> <rate> <ms>
 */
import WebSocket from 'ws';

const [url, socketsArg, rateArg, msArg] = process.argv.slice(2);
const sockets = Number(socketsArg);
const rate = Number(rateArg);
const ms = Number(msArg);
process.stdout.write('start\n');
let sent = 0;
const closes: Record<number, number> = {};
const all = Array.from({ length: sockets }, (_, k) => {
  const ws = new WebSocket(url);
  let welcomed = false;
  ws.on('message', (data) => {
    if (!welcomed && (JSON.parse(String(data)) as { type: string }).type === 'welcome') {
      welcomed = true;
      settle();
    }
  });
  ws.on('close', (code) => {
    closes[code] = (closes[code] ?? 0) + 1;
    if (!welcomed) settle();
  });
  ws.on('error', () => undefined);
  const timer = setInterval(() => {
    if (welcomed && ws.readyState === ws.OPEN) {
      ws.send(JSON.stringify({ type: 'cursor', x: k, y: sent++ }));
    }
  }, 1000 / rate);
  return { ws, timer };
});
let unsettled = sockets;
function settle(): void {
  if (--unsettled === 0) {
    process.stdout.write('settled\n');
    setTimeout(finish, ms);
  }
}
function finish(): void {
  for (const s of all) clearInterval(s.timer);
  const open = all.filter((s) => s.ws.readyState === s.ws.OPEN).length;
  process.stdout.write(JSON.stringify({ sent, open, closes }) + '\n');
  for (const s of all) s.ws.terminate();
  process.exit(0);
}
