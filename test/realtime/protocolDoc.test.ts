import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DOC, renderedDoc } from '../../realtime/protocol/describe.js';

describe('docs/protocol.md', () => {
  it('shows every message type with the schema the gateway validates it with (run realtime/protocol/describe.ts --write)', () => {
    expect(readFileSync(DOC, 'utf8')).toBe(renderedDoc());
  });
});
