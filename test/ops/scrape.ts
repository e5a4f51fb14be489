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
