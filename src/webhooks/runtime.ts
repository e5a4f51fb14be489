import type { Deps } from '../deps.js';
import { systemResolver, type AddressPolicy, type Resolver } from './address.js';
import { SecretBox } from './secrets.js';

/**
 * What the webhook code needs beyond Deps: the address policy (allow list and
 * DNS resolver), the secret box, and the TLS trust used by the sender.
 *
 * Two of them are replaceable for tests only, per Deps object, through
 * `setWebhookRuntime`: the resolver (so tests can make a name resolve to
 * anything, differently the second time, ...) and `ca` (so the sender trusts
 * the self-signed certificate of a loopback test receiver). Production code
 * never calls it: the system resolver and Node's default CA store are used.
 */
export interface WebhookRuntime {
  policy: AddressPolicy;
  secrets: SecretBox;
  /** extra trusted CA certificates (PEM), tests only; replaces the default store */
  ca?: string | string[];
}

export interface RuntimeOverrides {
  resolve?: Resolver;
  ca?: string | string[];
}

const overrides = new WeakMap<object, RuntimeOverrides>();
const built = new WeakMap<object, WebhookRuntime>();

/** Tests only: replaces the resolver and/or trusted CA for everything built on these deps. */
export function setWebhookRuntime(deps: Deps, o: RuntimeOverrides): void {
  overrides.set(deps, { ...overrides.get(deps), ...o });
  built.delete(deps);
}

export function webhookRuntime(deps: Pick<Deps, 'config'>): WebhookRuntime {
  let rt = built.get(deps);
  if (!rt) {
    const o = overrides.get(deps) ?? {};
    rt = {
      policy: { allowHosts: deps.config.WEBHOOK_ALLOW_HOSTS, resolve: o.resolve ?? systemResolver },
      secrets: new SecretBox(deps.config.WEBHOOK_SECRET_KEYS),
      ca: o.ca,
    };
    built.set(deps, rt);
  }
  return rt;
}
