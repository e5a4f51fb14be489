import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigSchema } from './config.js';

/**
 * docs/configuration.md, made whole from `ConfigSchema`: each variable's
 * default (what the schema gives for an unset variable), its range (the
 * schema's bounds or values) and its meaning (its `.describe`/`.meta`), so the
 * document cannot drift from what the process accepts.
 * `npx tsx src/configDoc.ts --write` rewrites it; a test fails when it is stale.
 */
export const DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/configuration.md');

type Meta = { description?: string; tests?: string };

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function shownDefault(s: z.ZodType): string {
  const r = s.safeParse(undefined);
  if (!r.success || r.data === undefined) return '(unset)';
  const v = r.data;
  if (Array.isArray(v)) return v.length === 0 ? '(empty)' : `\`${v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(',')}\``;
  if (v === '') return '(empty)';
  return `\`${String(v)}\``;
}

/** Bounds and values as the schema checks them; '-' when it checks only a format (the meaning says which). */
function shownRange(s: z.ZodType): string {
  const input = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  if (Array.isArray(input.enum)) return (input.enum as unknown[]).map((x) => `\`${String(x)}\``).join(', ');
  const min = input.minimum ?? (input.exclusiveMinimum !== undefined ? `> ${String(input.exclusiveMinimum)}` : undefined);
  const max = typeof input.maximum === 'number' && input.maximum < Number.MAX_SAFE_INTEGER ? input.maximum : undefined;
  if (min !== undefined || max !== undefined) {
    if (typeof min === 'string') return max === undefined ? min : `${min}, ≤ ${max}`;
    if (max === undefined) return `≥ ${String(min)}`;
    return `${String(min ?? '')}-${max}`;
  }
  const output = z.toJSONSchema(s, { io: 'output', unrepresentable: 'any' }) as Record<string, unknown>;
  const items = output.items as Record<string, unknown> | undefined;
  if (output.type === 'array' && items && Array.isArray(items.enum)) return `comma list of ${(items.enum as unknown[]).map((x) => `\`${String(x)}\``).join(', ')}`;
  if (output.type === 'array' && items?.type === 'integer') return `comma list of integers ≥ ${String(items.minimum ?? '')}`;
  if (typeof input.minLength === 'number' && input.minLength > 1) return `≥ ${input.minLength} characters`;
  return '-';
}

/** Every variable without a meaning; the test requires none. */
export function undescribed(): string[] {
  return Object.entries(ConfigSchema.shape)
    .filter(([, s]) => !(z.globalRegistry.get(s) as Meta | undefined)?.description)
    .map(([name]) => name);
}

export function describeConfig(): string {
  const out = [
    '# Configuration',
    '',
    '<!-- generated from src/config.ts by src/configDoc.ts (`npx tsx src/configDoc.ts --write`): do not edit -->',
    '',
    'Every setting is an environment variable, parsed once at start-up by `src/config.ts` (zod). A bad value',
    'stops the process with a message naming the variable (exit code 2). An empty variable counts as unset.',
    'Ranges are inclusive. A setting whose meaning ends in **Only tests shorten it**, **Tests shorten it** or',
    '**Local development and tests only** keeps its default in production.',
    '',
    '| Variable | Default | Range | Meaning |',
    '|---|---|---|---|',
  ];
  for (const [name, s] of Object.entries(ConfigSchema.shape) as [string, z.ZodType][]) {
    const meta = (z.globalRegistry.get(s) ?? {}) as Meta;
    const meaning = [meta.description ?? '', meta.tests ? `**${meta.tests}**` : ''].filter(Boolean).join('. ');
    out.push(`| \`${name}\` | ${cell(shownDefault(s))} | ${cell(shownRange(s))} | ${cell(meaning)} |`);
  }
  return out.join('\n') + '\n';
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  if (process.argv.includes('--write')) writeFileSync(DOC, describeConfig());
  else if (readFileSync(DOC, 'utf8') !== describeConfig()) {
    console.error('docs/configuration.md is stale: npx tsx src/configDoc.ts --write');
    process.exitCode = 1;
  }
}
