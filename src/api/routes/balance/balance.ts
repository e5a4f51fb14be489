import { getBalance } from '../../../domain/ledger.js';
import { BalanceSchema, presentBalance } from '../../presenters/balance.js';
import { defineRoute } from '../../route.js';

export const balanceRoutes = [
  defineRoute({
    method: 'get',
    path: '/balance',
    operationId: 'getBalance',
    tag: 'Balance and usage',
    summary: "The partner's balance and plan",
    responses: { 200: { description: 'Balance', schema: BalanceSchema } },
    errors: [],
    async handler(ctx) {
      const { deps, auth } = ctx.state;
      ctx.body = presentBalance(await getBalance(deps.readSql, auth.partner.id));
    },
  }),
];
