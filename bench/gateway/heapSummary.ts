import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/**
 * What a held connection costs on the V8 heap: compares two heap snapshots of
 * one server process (the load test's --heap-snapshot writes `<node>.1` before
 * the joins and `<node>.2` holding every connection) and prints, per kind of
 * object (V8 node type and constructor or string), how many more there are and
 * how many bytes more, per connection.
 *
 *   tsx bench/gateway/heapSummary.ts <before.heapsnapshot> <held.heapsnapshot> --connections 10000 [--top 40]
 *   tsx bench/gateway/heapSummary.ts <before> <held> --unit ClientConnection
 *
 * `--unit <constructor>`: count the connections as the objects of that class
 * the second snapshot has more (the gateway's ClientConnection), for a run
 * that lost some before its snapshot.
 *
 * Self sizes only (an object's own fields; a Map's backing store is a separate
 * "array" row, a string its own row). Memory outside the V8 heap (uWS's C++
 * per-socket data, kernel buffers are not counted in RSS at all) is the RSS
 * growth less the heap growth.
 */
const { values: a, positionals } = parseArgs({ allowPositionals: true, options: { connections: { type: 'string' }, unit: { type: 'string' }, top: { type: 'string', default: '40' } } });
if (positionals.length !== 2 || !(a.connections || a.unit)) throw new Error('usage: heapSummary.ts <before.heapsnapshot> <held.heapsnapshot> (--connections N | --unit Constructor) [--top K]');

interface Group {
  count: number;
  bytes: number;
}

/** Groups a snapshot's nodes by type and name (strings and numbers by type alone, closures by function name). */
function groups(file: string): { by: Map<string, Group>; total: number } {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [TYPE, NAME, SIZE] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const by = new Map<string, Group>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + TYPE]];
    const size = snap.nodes[i + SIZE];
    total += size;
    let name = snap.strings[snap.nodes[i + NAME]];
    if (type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'number') name = '';
    else if (name.length > 60) name = `${name.slice(0, 57)}...`;
    const key = `${type}\t${name}`;
    const g = by.get(key);
    if (g) {
      g.count++;
      g.bytes += size;
    } else by.set(key, { count: 1, bytes: size });
  }
  return { by, total };
}

const before = groups(positionals[0]);
const held = groups(positionals[1]);
const unitKey = `object\t${a.unit}`;
const N = a.unit ? (held.by.get(unitKey)?.count ?? 0) - (before.by.get(unitKey)?.count ?? 0) : Number(a.connections);
if (!(N > 0)) throw new Error(`no more ${a.unit} objects in the second snapshot`);
const rows = [...held.by].map(([key, g]) => {
  const b = before.by.get(key) ?? { count: 0, bytes: 0 };
  const [type, name] = key.split('\t');
  return { type, name, count: (g.count - b.count) / N, bytes: (g.bytes - b.bytes) / N };
});
rows.sort((x, y) => y.bytes - x.bytes);
const out = [
  `V8 heap (self sizes): ${(before.total / 2 ** 20).toFixed(1)} MB before, ${(held.total / 2 ** 20).toFixed(1)} MB holding ${N} connections${a.unit ? ` (${a.unit} objects)` : ''}: ${((held.total - before.total) / N).toFixed(0)} bytes per connection`,
  '',
  '| kind (V8 type: constructor / function) | objects per connection | bytes per connection |',
  '|---|---|---|',
  ...rows.slice(0, Number(a.top)).map((r) => `| ${r.type}${r.name ? `: ${r.name.replace(/\|/g, '\\|')}` : ''} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`),
];
process.stdout.write(`${out.join('\n')}\n`);
