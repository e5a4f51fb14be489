import net from 'node:net';
import { afterAll } from 'vitest';

/**
 * A TCP proxy in front of the gateway, to cut the network under a browser:
 * `cut(ms)` drops every connection at once (as a lost Wi-Fi would) and refuses
 * new ones for `ms`. Loopback only; closed after the file.
 */
export async function startProxy(targetPort: number): Promise<{ port: number; cut: (ms: number) => void }> {
  const sockets = new Set<net.Socket>();
  let downUntil = 0;
  const server = net.createServer((client) => {
    if (Date.now() < downUntil) return void client.destroy();
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
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
  };
}
