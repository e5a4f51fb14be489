import { afterAll } from 'vitest';
import type { Clock } from '../../../src/lib/clock.js';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../../realtime/index.js';
import { makeDeps } from '../../helpers/deps.js';

export type TestGateway = RunningGateway & {
  deps: ReturnType<typeof makeDeps>;
  wsUrl: (token: string) => string;
  httpUrl: (path: string) => string;
  /** runs every maintenance job once, in order, and waits for the Postgres work they queued */
  maintain: () => Promise<void>;
  /** waits for queued Postgres work (joins, departures, meter effects) */
  settle: () => Promise<void>;
};

/** A real uWS gateway on a free loopback port with real Postgres and Redis; closed after the file. */
export async function startTestGateway(opts: { env?: Record<string, string>; clock?: Clock; options?: GatewayOptions } = {}): Promise<TestGateway> {
  const deps = makeDeps({ env: opts.env, clock: opts.clock });
  const gw = await startGateway(deps, 0, opts.options);
  gw.maintenance.stop(); // tests drive maintenance themselves (maintain())
  afterAll(async () => {
    await gw.close();
    await deps.close();
  });
  const settle = async () => {
    // a few rounds: effects queue more effects (start -> set session -> snapshot)
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 20));
      await gw.gateway.idle();
    }
  };
  return {
    ...gw,
    deps,
    wsUrl: (token) => `ws://127.0.0.1:${gw.port}/ws?token=${encodeURIComponent(token)}`,
    httpUrl: (path) => `http://127.0.0.1:${gw.port}${path}`,
    settle,
    maintain: async () => {
      const m = gw.maintenance;
      await m.guard('heartbeat', () => m.heartbeat());
      await settle();
      await m.guard('flush', () => m.flush());
      await settle();
      await m.guard('sweep', () => m.sweep());
      await settle();
    },
  };
}
