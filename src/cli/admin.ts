import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { createSql, type Sql } from '../db/index.js';
import { migrate } from '../db/migrate.js';
import { createApiKey, revokeApiKey } from '../domain/apiKeys.js';
import { topUp } from '../domain/ledger.js';
import { PLANS, PlanSchema } from '../domain/enums.js';
import { createPartner, DEFAULT_BOARD_RATE_PERCENT, setPartnerSuspended } from '../domain/partners.js';
import { AppError } from '../errors.js';

const USAGE = `usage: npm run --silent admin -- <command>
  partner create --name <name> [--plan full|board_only] [--board-rate-percent <0-100>]
  partner suspend <partner_id>
  partner resume <partner_id>
  key create <partner_id>
  key revoke                      (reads the API key from standard input: never on the command line)
  topup <partner_id> --minutes <n> [--rub <amount>]
Prints one JSON object on stdout.`;

class UsageError extends Error {}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined || v === '') throw new UsageError(`missing ${what}`);
  return v;
}

/** Runs one admin command and returns the JSON it prints (`stdin`: what `key revoke` reads). Exported for tests. */
export async function runAdmin(sql: Sql, argv: string[], now = new Date(), stdin?: string): Promise<Record<string, unknown>> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      'board-rate-percent': { type: 'string' },
      minutes: { type: 'string' },
      rub: { type: 'string' },
    },
  });
  const [group, action, arg] = positionals;
  const cmd = group === 'topup' ? 'topup' : `${group ?? ''} ${action ?? ''}`;
  switch (cmd) {
    case 'partner create': {
      const parsed = PlanSchema.safeParse(values.plan ?? 'full');
      if (!parsed.success) throw new UsageError(`--plan must be ${PLANS.join(' or ')}`);
      const plan = parsed.data;
      const rate = values['board-rate-percent'] === undefined ? DEFAULT_BOARD_RATE_PERCENT : Number(values['board-rate-percent']);
      if (!Number.isInteger(rate) || rate < 0 || rate > 100) throw new UsageError('--board-rate-percent must be an integer 0-100');
      const partner = await createPartner(sql, { name: need(values.name, '--name'), plan, boardRatePercent: rate });
      const key = await createApiKey(sql, partner.id);
      return { partner_id: partner.id, api_key: key.apiKey };
    }
    case 'partner suspend':
    case 'partner resume': {
      const p = await setPartnerSuspended(sql, need(arg, '<partner_id>'), action === 'suspend', now);
      return { partner_id: p.id, suspended: p.suspended_at !== null };
    }
    case 'key create': {
      const key = await createApiKey(sql, need(arg, '<partner_id>')).catch((err) => {
        if ((err as { code?: string }).code === '23503') throw new UsageError('unknown partner');
        throw err;
      });
      return { api_key: key.apiKey };
    }
    case 'key revoke': {
      // a key on the command line would stay in the process list and the shell's history
      if (arg !== undefined) throw new UsageError('give the API key on standard input, not on the command line: `npm run --silent admin -- key revoke < key.txt`');
      const revoked = await revokeApiKey(sql, need((stdin ?? '').trim(), 'the API key on standard input'), now);
      if (!revoked) throw new UsageError('no live key matches');
      return { revoked: true };
    }
    case 'topup': {
      const partnerId = need(action, '<partner_id>');
      const minutes = Number(need(values.minutes, '--minutes'));
      if (!Number.isInteger(minutes) || minutes <= 0) throw new UsageError('--minutes must be a positive integer');
      return topUp(sql, { partnerId, minutes, rub: values.rub, at: now });
    }
    default:
      throw new UsageError(`unknown command: ${positionals.join(' ') || '(none)'}`);
  }
}

const isMain = process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!);
if (isMain && process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
  process.stdout.write(`${USAGE}\n`);
} else if (isMain) {
  const config = loadConfig();
  let sql: Sql | undefined;
  try {
    await migrate(config.DATABASE_URL);
    sql = createSql(config.DATABASE_URL, { max: 1 });
    const argv = process.argv.slice(2);
    const stdin = argv[0] === 'key' && argv[1] === 'revoke' && !process.stdin.isTTY ? readFileSync(0, 'utf8') : undefined;
    const out = await runAdmin(sql, argv, new Date(), stdin);
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } catch (err) {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    const known = err instanceof AppError;
    process.stderr.write(`${usage || known ? (err as Error).message : String(err)}\n${usage ? `${USAGE}\n` : ''}`);
    process.exitCode = 2;
  } finally {
    await sql?.end();
  }
}
