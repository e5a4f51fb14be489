import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultFeatures } from '../../realtime/features/index.js';
import { ClientMessages } from '../../realtime/protocol/clientMessages.js';
import { ERROR_CODES } from '../../realtime/protocol/errors.js';
import { coreMessages } from '../../realtime/protocol/messages/index.js';
import { fileDeps } from '../helpers/deps.js';

/**
 * The catalogue (realtime/protocol/{clientMessages,serverMessages,errors}.ts)
 * is the one description of the protocol: what the gateway handles and what
 * it sends must be in it.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((f) => {
    const rel = path.join(dir, f);
    if (statSync(path.join(ROOT, rel)).isDirectory()) return sources(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

describe('protocol catalogue', () => {
  const deps = fileDeps();
  const features = defaultFeatures(deps);
  afterAll(() => Promise.all(features.map((f) => f.close?.())));
  const handled = [...coreMessages, ...features.flatMap((f) => f.messages ?? [])];
  const json = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' });

  it('has every message type the gateway handles, each validated with a schema equal to the catalogue one, and a handler for each of its client messages', () => {
    expect(handled.map((d) => d.type).sort()).toEqual(Object.keys(ClientMessages).sort());
    for (const def of handled) expect(json(def.schema), def.type).toEqual(json(ClientMessages[def.type as keyof typeof ClientMessages]));
  });

  it('lists every error code that realtime/ and src/ send in an error frame', () => {
    const sender = /\b(?:featureError|sendError|invalidFrame|errorFrame)\(\s*'([a-z_]+)'/g;
    const raw = /type:\s*'error',\s*code:\s*'([a-z_]+)'/g;
    const parseOutcome = /\{\s*ok:\s*false,\s*code:\s*'([a-z_]+)'/g;
    const sent = new Map<string, string>();
    for (const file of [...sources('realtime'), ...sources('src')]) {
      const text = readFileSync(path.join(ROOT, file), 'utf8');
      for (const re of [sender, raw, parseOutcome]) for (const m of text.matchAll(re)) sent.set(m[1], file);
    }
    // the scan must see the senders it is meant to check (a renamed helper would make it pass vacuously)
    expect([...sent.keys()]).toEqual(expect.arrayContaining(['not_ready', 'internal', 'rate_limited', 'bad_json', 'binary_not_supported', 'forbidden', 'board_only', 'not_found']));
    for (const [code, file] of sent) expect(Object.keys(ERROR_CODES), `${code} (sent in ${file})`).toContain(code);
  });
});
