import { readFileSync } from 'node:fs';
import { commandLine } from '../lib/cli.js';

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
 * `--by-referrer`: each kind is split by what holds it (the first strong
 * reference to the object: the holder's type and constructor, and the
 * property, element or closure variable it sits in), so a row reads "an array
 * held by Lesson.sockets" instead of "an array". This is how a per-lesson Map
 * or a closure's context kept per connection is found.
 *
 * Self sizes only (an object's own fields; a Map's backing store is a separate
 * "array" row, a string its own row). Memory outside the V8 heap (uWS's C++
 * per-socket data, kernel buffers are not counted in RSS at all) is the RSS
 * growth less the heap growth.
 */
const { values: a, positionals } = commandLine('usage: tsx bench/gateway/heapSummary.ts <before.heapsnapshot> <held.heapsnapshot> (--connections N | --unit Constructor)\nWhat a held connection costs on the V8 heap, per kind of object.', {
  connections: { type: 'string', help: 'connections held in the second snapshot and not the first' },
  unit: { type: 'string', help: 'count the connections as the objects of this class the second snapshot has more' },
  top: { type: 'string', default: '40', help: 'rows printed' },
  'by-referrer': { type: 'boolean', default: false, help: 'split each kind by what holds it' },
}, { allowPositionals: true });
if (positionals.length !== 2 || !(a.connections || a.unit)) throw new Error('usage: heapSummary.ts <before.heapsnapshot> <held.heapsnapshot> (--connections N | --unit Constructor) [--top K] [--by-referrer]');

interface Group {
  count: number;
  bytes: number;
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** A node's kind: its type and name (strings and numbers by type alone, closures by function name). */
function kind(type: string, rawName: string): string {
  let name = rawName;
  if (type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'number') name = '';
  else if (name.length > 60) name = `${name.slice(0, 57)}...`;
  return `${type}\t${name}`;
}

/**
 * For each node (by index), the first strong reference to it: "<holder kind> .<edge>" (array
 * elements as [], internal edges by their name). Weak edges and the snapshot's synthetic roots are skipped.
 */
function referrers(snap: Snapshot, kinds: string[]): string[] {
  const nf = snap.snapshot.meta.node_fields.length;
  const ef = snap.snapshot.meta.edge_fields;
  const edgeTypes = snap.snapshot.meta.edge_types[0];
  const [ETYPE, ENAME, ETO] = ['type', 'name_or_index', 'to_node'].map((f) => ef.indexOf(f));
  const EDGES = snap.snapshot.meta.node_fields.indexOf('edge_count');
  const out: string[] = new Array(kinds.length);
  let e = 0;
  for (let n = 0; n < kinds.length; n++) {
    const count = snap.nodes[n * nf + EDGES];
    const holder = kinds[n];
    for (let k = 0; k < count; k++, e += ef.length) {
      const to = snap.edges[e + ETO] / nf;
      if (out[to] !== undefined) continue;
      const type = edgeTypes[snap.edges[e + ETYPE]];
      if (type === 'weak' || type === 'shortcut' || holder.startsWith('synthetic')) continue;
      const edge = type === 'element' || type === 'hidden' ? '[]' : snap.strings[snap.edges[e + ENAME]];
      out[to] = `${holder.replace('\t', ': ')} .${edge}`;
    }
  }
  return out;
}

/** Groups a snapshot's nodes by kind (and, with --by-referrer, by what holds each). */
function groups(file: string): { by: Map<string, Group>; total: number } {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [TYPE, NAME, SIZE] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const kinds: string[] = [];
  for (let i = 0; i < snap.nodes.length; i += fields.length) kinds.push(kind(types[snap.nodes[i + TYPE]], snap.strings[snap.nodes[i + NAME]]));
  const held = a['by-referrer'] ? referrers(snap, kinds) : undefined;
  const by = new Map<string, Group>();
  let total = 0;
  for (let n = 0; n < kinds.length; n++) {
    const size = snap.nodes[n * fields.length + SIZE];
    total += size;
    const key = held ? `${kinds[n]}\t${held[n] ?? '(no strong holder)'}` : kinds[n];
    const g = by.get(key);
    if (g) {
      g.count++;
      g.bytes += size;
    } else by.set(key, { count: 1, bytes: size });
  }
  return { by, total };
}

const cell = (text: string) => text.replace(/\|/g, '\\|');
const before = groups(positionals[0]);
const held = groups(positionals[1]);
const unitKey = `object\t${a.unit}`;
/** objects of a kind, whoever holds them (with --by-referrer a kind is split over several keys) */
const countOf = (by: Map<string, Group>, k: string) => [...by].reduce((n, [key, g]) => n + (key === k || key.startsWith(`${k}\t`) ? g.count : 0), 0);
const N = a.unit ? countOf(held.by, unitKey) - countOf(before.by, unitKey) : Number(a.connections);
if (!(N > 0)) throw new Error(`no more ${a.unit} objects in the second snapshot`);
const rows = [...held.by].map(([key, g]) => {
  const b = before.by.get(key) ?? { count: 0, bytes: 0 };
  const [type, name, holder] = key.split('\t');
  return { type, name, holder, count: (g.count - b.count) / N, bytes: (g.bytes - b.bytes) / N };
});
rows.sort((x, y) => y.bytes - x.bytes);
const out = [
  `V8 heap (self sizes): ${(before.total / 2 ** 20).toFixed(1)} MB before, ${(held.total / 2 ** 20).toFixed(1)} MB holding ${N} connections${a.unit ? ` (${a.unit} objects)` : ''}: ${((held.total - before.total) / N).toFixed(0)} bytes per connection`,
  '',
  `| kind (V8 type: constructor / function)${a['by-referrer'] ? ' | held by (the first strong reference)' : ''} | objects per connection | bytes per connection |`,
  `|---|${a['by-referrer'] ? '---|' : ''}---|---|`,
  ...rows
    .slice(0, Number(a.top))
    .map((r) => `| ${r.type}${r.name ? `: ${cell(r.name)}` : ''}${r.holder !== undefined ? ` | ${cell(r.holder)}` : ''} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`),
];
process.stdout.write(`${out.join('\n')}\n`);
