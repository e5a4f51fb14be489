import { connect } from 'node:net';

/** One Prometheus text exposition, as `name{labels}` -> value (labels as written, in order). */
export type Samples = Map<string, number>;

export async function scrape(url: string): Promise<{ status: number; type: string | null; text: string; samples: Samples }> {
  const res = await fetch(url);
  const text = await res.text();
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+?(?:\{.*\})?) (\S+)$/.exec(line);
    if (m) samples.set(m[1], Number(m[2]));
  }
  return { status: res.status, type: res.headers.get('content-type'), text, samples };
}

/** Families declared in the exposition (`# TYPE name kind`). */
export function families(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]));
}

/** The sum of the samples of `name` whose labels include every `key="value"` given. */
export function value(samples: Samples, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [key, v] of samples) {
    const brace = key.indexOf('{');
    const n = brace < 0 ? key : key.slice(0, brace);
    if (n !== name) continue;
    const ls = brace < 0 ? '' : key.slice(brace);
    if (Object.entries(labels).every(([k, val]) => ls.includes(`${k}="${val}"`))) sum += v;
  }
  return sum;
}

/**
 * A POST with a JSON body sent on a raw socket, the body held back after 3 bytes: the request is in
 * flight until `rest()` sends the remainder. `finish()` sends it and resolves with the raw response.
 */
export function heldPost(port: number, path: string, key: string, body: string) {
  const socket = connect(port, '127.0.0.1');
  let response = '';
  socket.on('data', (d) => (response += d));
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  socket.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 3)}`);
  const rest = () => socket.write(body.slice(3));
  return {
    rest,
    response: () => response,
    closed,
    finish: async () => {
      rest();
      for (let i = 0; i < 400 && !response.includes('\r\n\r\n'); i++) await new Promise((r) => setTimeout(r, 25));
      socket.end();
      await closed;
      return response;
    },
  };
}
