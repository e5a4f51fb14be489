import type { Db } from '../../src/db/index.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createPartner, type Partner, type Plan } from '../../src/domain/partners.js';
import type { Sql } from '../../src/db/index.js';

export interface PartnerFixture {
  partner: Partner;
  apiKey: string;
  keyId: string;
}

/** A partner with one API key and (by default) 600 paid minutes. */
export async function partnerFactory(
  sql: Sql,
  opts: { plan?: Plan; boardRatePercent?: number; minutes?: number; rub?: string; name?: string } = {},
): Promise<PartnerFixture> {
  const partner = await createPartner(sql, {
    name: opts.name ?? 'Test partner',
    plan: opts.plan ?? 'full',
    boardRatePercent: opts.boardRatePercent,
  });
  const key = await createApiKey(sql, partner.id);
  const minutes = opts.minutes ?? 600;
  if (minutes > 0) await topUp(sql, { partnerId: partner.id, minutes, rub: opts.rub ?? '1000', at: new Date() });
  return { partner, apiKey: key.apiKey, keyId: key.id };
}

export async function balanceOf(db: Db, partnerId: string): Promise<number> {
  const [row] = await db<{ balance_seconds: number }[]>`SELECT balance_seconds FROM partners WHERE id = ${partnerId}`;
  return row.balance_seconds;
}
