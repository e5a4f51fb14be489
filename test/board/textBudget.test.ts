import { describe, expect, it } from 'vitest';
import { BoardWork, elementBytes } from '../../src/board/apply.js';
import { BoardOpError } from '../../src/board/errors.js';
import { BOARD_LIMITS } from '../../src/board/limits.js';
import { del, rect, text } from './factories.js';

const student = { role: 'student' as const };

function board(liveBytes = 0) {
  return new BoardWork(
    { seq: 0, pages: [{ id: 'page-1', name: 'Page 1' }], pinned_page_id: null, live_elements: 0, live_bytes: liveBytes, first_content_seq: null },
    new Map(),
  );
}

describe('the text budget (a character of text counts BOARD_LIMITS.textWeight bytes)', () => {
  it('charges a text its characters, weighted, and gives them back when it is deleted', () => {
    const w = board();
    const t = text('t', 'a'.repeat(1000));
    w.apply({ type: 'element.add', elements: [t] }, student);
    expect(w.head.live_bytes).toBe(elementBytes(t) + (BOARD_LIMITS.textWeight - 1) * 1000);
    const shorter = { ...t, text: 'short', version: t.version + 1 };
    w.apply({ type: 'element.update', elements: [shorter] }, student);
    expect(w.head.live_bytes).toBe(elementBytes(shorter) + (BOARD_LIMITS.textWeight - 1) * 5);
    w.apply({ type: 'element.delete', elements: [del('t', t.version + 2)] }, student);
    expect(w.head.live_bytes).toBe(0);
  });

  it('refuses text past about 1 M characters a board while a stroke still fits', () => {
    // a board holding 16 MB less 100 KB: a rectangle fits, 10,000 characters of text (160 KB weighted) do not
    const w = board(BOARD_LIMITS.bytesPerBoard - 100_000);
    let code = '';
    try {
      w.apply({ type: 'element.add', elements: [text('t', 'a'.repeat(10_000))] }, student);
    } catch (err) {
      code = (err as BoardOpError).code;
    }
    expect(code).toBe('board_full');
    expect(w.head.seq).toBe(0);
    expect(w.apply({ type: 'element.add', elements: [rect('r')] }, student)?.seq).toBe(1);
    expect(BOARD_LIMITS.bytesPerBoard / BOARD_LIMITS.textWeight).toBeLessThanOrEqual(1024 * 1024);
  });
});
