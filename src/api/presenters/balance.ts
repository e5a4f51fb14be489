import { z } from 'zod';
import type { Balance } from '../../domain/ledger.js';
import { PlanSchema } from '../../domain/enums.js';

export const BalanceSchema = z
  .object({
    balance_seconds: z.number().int(),
    balance_minutes: z.number().int(),
    plan: PlanSchema,
    board_rate_percent: z.number().int(),
  })
  .meta({ id: 'Balance' });

export function presentBalance(b: Balance): z.infer<typeof BalanceSchema> {
  return { ...b };
}
