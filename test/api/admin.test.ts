import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BOARD_RATE_PERCENT } from '../../src/domain/partners.js';
import { testEnv } from '../helpers/deps.js';
import { entryOf } from '../helpers/entry.js';
import { startTestApi } from '../helpers/api.js';

const api = await startTestApi();

function admin(...args: string[]) {
  return adminWith(undefined, ...args);
}

/** One run of the admin CLI (from the build when it is current: test/helpers/entry.ts), `input` on its stdin. */
function adminWith(input: string | undefined, ...args: string[]) {
  return new Promise<{ status: number | null; stdout: string; stderr: string; json: any }>((resolve, reject) => {
    const child = spawn(process.execPath, [...entryOf('src/cli/admin.ts'), ...args], { env: { ...process.env, ...testEnv() }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.stdin.end(input ?? '');
    child.once('close', (status) => resolve({ status, stdout, stderr, json: stdout.trim() ? JSON.parse(stdout) : undefined }));
  });
}

describe('admin CLI', () => {
  it('creates a partner with a working key, tops up, creates and revokes keys, suspends and resumes, printing one JSON object each', async () => {
    const created = await admin('partner', 'create', '--name', 'Acme School', '--plan', 'board_only', '--board-rate-percent', '40');
    expect(created.status).toBe(0);
    expect(created.json).toEqual({ partner_id: expect.stringMatching(/^ptr_/), api_key: expect.stringMatching(/^wbk_[0-9A-Za-z]{32}$/) });
    const { partner_id, api_key } = created.json;
    const bal = await api.request('GET', '/balance', { key: api_key });
    expect(bal.body).toEqual({ balance_seconds: 0, balance_minutes: 0, plan: 'board_only', board_rate_percent: 40 });

    expect((await admin('topup', partner_id, '--minutes', '5', '--rub', '50')).json).toEqual({ balance_seconds: 300 });
    expect((await admin('topup', partner_id, '--minutes', '1')).json).toEqual({ balance_seconds: 360 });

    const key2 = (await admin('key', 'create', partner_id)).json.api_key;
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(200);
    // never on the command line (the process list, the shell's history): it is refused there, read from stdin
    const onLine = await admin('key', 'revoke', key2);
    expect(onLine.status).toBe(2);
    expect(onLine.stderr).toMatch(/standard input/);
    expect(onLine.stderr).not.toContain(key2);
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(200);
    expect((await adminWith(`${key2}\n`, 'key', 'revoke')).json).toEqual({ revoked: true });
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(401);

    expect((await admin('partner', 'suspend', partner_id)).json).toEqual({ partner_id, suspended: true });
    expect((await api.request('GET', '/balance', { key: api_key })).status).toBe(401);
    expect((await admin('partner', 'resume', partner_id)).json).toEqual({ partner_id, suspended: false });
    expect((await api.request('GET', '/balance', { key: api_key })).status).toBe(200);
  }, 60_000);

  it('defaults to the full plan at the board rate default (30 percent)', async () => {
    expect(DEFAULT_BOARD_RATE_PERCENT).toBe(30);
    const { api_key } = (await admin('partner', 'create', '--name', 'Defaults')).json;
    expect((await api.request('GET', '/balance', { key: api_key })).body).toMatchObject({ plan: 'full', board_rate_percent: DEFAULT_BOARD_RATE_PERCENT });
  });

  it('has the column default of partners.board_rate_percent mirror DEFAULT_BOARD_RATE_PERCENT', async () => {
    const [col] = await api.deps.sql<{ column_default: string }[]>`
      SELECT column_default FROM information_schema.columns WHERE table_name = 'partners' AND column_name = 'board_rate_percent'`;
    expect(Number(col.column_default)).toBe(DEFAULT_BOARD_RATE_PERCENT);
  });

  it('prints usage to stderr and exits non-zero on wrong arguments, writing nothing to stdout', async () => {
    const wrong = [[], ['bogus'], ['partner', 'create'], ['partner', 'create', '--name', 'x', '--plan', 'gold'], ['topup', 'ptr_x'], ['topup', 'ptr_x', '--minutes', '-5'], ['partner', 'create', '--name', 'x', '--unknown']];
    const cases = [...wrong, ['topup', 'ptr_nope', '--minutes', '5']];
    // independent runs, two at a time (the machine has two cores)
    const results: Awaited<ReturnType<typeof admin>>[] = [];
    let next = 0;
    await Promise.all([0, 1].map(async () => {
      for (let i = next++; i < cases.length; i = next++) results[i] = await admin(...cases[i]);
    }));
    wrong.forEach((args, i) => {
      const r = results[i];
      expect(r.status, args.join(' ')).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/usage: npm run --silent admin/);
    });
    const unknownPartner = results[wrong.length];
    expect(unknownPartner.status).not.toBe(0);
    expect(unknownPartner.stderr).toMatch(/Partner not found/);
  }, 60_000);
});
