import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BOARD_RATE_PERCENT } from '../../src/domain/partners.js';
import { testEnv } from '../helpers/deps.js';
import { startTestApi } from '../helpers/api.js';

const api = await startTestApi();

function admin(...args: string[]) {
  return adminWith(undefined, ...args);
}

function adminWith(input: string | undefined, ...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/admin.ts', ...args], { env: { ...process.env, ...testEnv() }, encoding: 'utf8', input });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, json: r.stdout.trim() ? JSON.parse(r.stdout) : undefined };
}

describe('admin CLI', () => {
  it('creates a partner with a working key, tops up, creates and revokes keys, suspends and resumes, printing one JSON object each', async () => {
    const created = admin('partner', 'create', '--name', 'Acme School', '--plan', 'board_only', '--board-rate-percent', '40');
    expect(created.status).toBe(0);
    expect(created.json).toEqual({ partner_id: expect.stringMatching(/^ptr_/), api_key: expect.stringMatching(/^wbk_[0-9A-Za-z]{32}$/) });
    const { partner_id, api_key } = created.json;
    const bal = await api.request('GET', '/balance', { key: api_key });
    expect(bal.body).toEqual({ balance_seconds: 0, balance_minutes: 0, plan: 'board_only', board_rate_percent: 40 });

    expect(admin('topup', partner_id, '--minutes', '5', '--rub', '50').json).toEqual({ balance_seconds: 300 });
    expect(admin('topup', partner_id, '--minutes', '1').json).toEqual({ balance_seconds: 360 });

    const key2 = admin('key', 'create', partner_id).json.api_key;
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(200);
    // never on the command line (the process list, the shell's history): it is refused there, read from stdin
    const onLine = admin('key', 'revoke', key2);
    expect(onLine.status).toBe(2);
    expect(onLine.stderr).toMatch(/standard input/);
    expect(onLine.stderr).not.toContain(key2);
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(200);
    expect(adminWith(`${key2}\n`, 'key', 'revoke').json).toEqual({ revoked: true });
    expect((await api.request('GET', '/balance', { key: key2 })).status).toBe(401);

    expect(admin('partner', 'suspend', partner_id).json).toEqual({ partner_id, suspended: true });
    expect((await api.request('GET', '/balance', { key: api_key })).status).toBe(401);
    expect(admin('partner', 'resume', partner_id).json).toEqual({ partner_id, suspended: false });
    expect((await api.request('GET', '/balance', { key: api_key })).status).toBe(200);
  }, 60_000);

  it('defaults to the full plan at the board rate default (30 percent)', async () => {
    expect(DEFAULT_BOARD_RATE_PERCENT).toBe(30);
    const { api_key } = admin('partner', 'create', '--name', 'Defaults').json;
    expect((await api.request('GET', '/balance', { key: api_key })).body).toMatchObject({ plan: 'full', board_rate_percent: DEFAULT_BOARD_RATE_PERCENT });
  });

  it('has the column default of partners.board_rate_percent mirror DEFAULT_BOARD_RATE_PERCENT', async () => {
    const [col] = await api.deps.sql<{ column_default: string }[]>`
      SELECT column_default FROM information_schema.columns WHERE table_name = 'partners' AND column_name = 'board_rate_percent'`;
    expect(Number(col.column_default)).toBe(DEFAULT_BOARD_RATE_PERCENT);
  });

  it('prints usage to stderr and exits non-zero on wrong arguments, writing nothing to stdout', () => {
    for (const args of [[], ['bogus'], ['partner', 'create'], ['partner', 'create', '--name', 'x', '--plan', 'gold'], ['topup', 'ptr_x'], ['topup', 'ptr_x', '--minutes', '-5'], ['partner', 'create', '--name', 'x', '--unknown']]) {
      const r = admin(...args);
      expect(r.status, args.join(' ')).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/usage: npm run --silent admin/);
    }
    const unknownPartner = admin('topup', 'ptr_nope', '--minutes', '5');
    expect(unknownPartner.status).not.toBe(0);
    expect(unknownPartner.stderr).toMatch(/Partner not found/);
  }, 60_000);
});
