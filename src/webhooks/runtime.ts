import type { Deps } from '../deps.js';
import { systemResolver, type AddressPolicy, type Resolver } from './address.js';
import { SecretBox } from './secrets.js';

/**
 * What the webhook code needs beyond Deps: the address policy (allow list and
 * DNS resolver), the secret box, and the TLS trust used by the sender.
 *
 * Production builds it from the config, once per Deps object: the system
 * resolver and Node's default CA store. A test that needs its own resolver (a
 * name that resolves to anything, differently the second time, ...) or `ca`
 * (the self-signed certificate of a loopback receiver) builds the runtime it
 * needs with buildWebhookRuntime and hands it over in its deps
 * (`{ ...deps, webhookRuntime }`); nothing is replaced behind a deps object.
 */
export interface WebhookRuntime {
  policy: AddressPolicy;
  secrets: SecretBox;
  /** extra trusted CA certificates (PEM), tests only; replaces the default store */
  ca?: string | string[];
}

export interface RuntimeOptions {
  resolve?: Resolver;
  ca?: string | string[];
}

/** Deps that may carry a runtime built for them (tests); without one it is built from the config. */
export type WebhookDeps = Pick<Deps, 'config'> & { webhookRuntime?: WebhookRuntime };

const built = new WeakMap<object, WebhookRuntime>();

export function buildWebhookRuntime(config: Deps['config'], o: RuntimeOptions = {}): WebhookRuntime {
  return {
    policy: { allowHosts: config.WEBHOOK_ALLOW_HOSTS, resolve: o.resolve ?? systemResolver },
    secrets: new SecretBox(config.WEBHOOK_SECRET_KEYS),
    ca: o.ca,
  };
}

export function webhookRuntime(deps: WebhookDeps): WebhookRuntime {
  if (deps.webhookRuntime) return deps.webhookRuntime;
  let rt = built.get(deps);
  if (!rt) built.set(deps, (rt = buildWebhookRuntime(deps.config)));
  return rt;
}
