import net from 'node:net';
import { afterAll } from 'vitest';

/**
 * A TCP proxy in front of a server on loopback (the gateway under a browser,
 * Postgres under a service): `cut(ms)` drops every connection at once (as a
 * lost Wi-Fi would) and refuses new ones for `ms` (or until `restore()`); `retarget(port)` sends
 * the connections opened from then on to another server (a proxy moving people to a new node);
 * `resetWhen` resets a
 * client's connection at a chunk it sends (a statement crossing it).
 * Closed after the file.
 */
export async function startProxy(
  targetPort: number,
  opts: { resetWhen?: (chunk: Buffer) => boolean } = {},
): Promise<{ port: number; cut: (ms: number) => void; restore: () => void; retarget: (port: number) => void }> {
  const sockets = new Set<net.Socket>();
  let target = targetPort;
  let downUntil = 0;
  const server = net.createServer((client) => {
    if (Date.now() < downUntil) return void client.destroy();
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    const resetWhen = opts.resetWhen;
    if (resetWhen) {
      client.on('data', (chunk: Buffer) => {
        if (!resetWhen(chunk)) return void upstream.write(chunk);
        client.resetAndDestroy();
        upstream.destroy();
      });
      upstream.pipe(client);
    } else client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: (ms) => {
      downUntil = Date.now() + ms;
      for (const s of sockets) s.destroy();
    },
    restore: () => {
      downUntil = 0;
    },
    retarget: (port) => {
      target = port;
    },
  };
}
