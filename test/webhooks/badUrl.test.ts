import { describe, expect, it } from 'vitest';
import type { Resolver } from '../../src/webhooks/address.js';
import { partnerFactory } from '../helpers/factories.js';
import { startWebhookStack } from './helpers/stack.js';

/**
 * PUT /webhook's bad_url says which rule failed and never what a name
 * resolves to (naming the address, "127.0.0.1 is not a public address",
 * would be an oracle for mapping the network).
 */
const DNS: Record<string, string[]> = {
  'intranet.example': ['10.20.30.40'],
  'loop.example': ['127.0.0.53'],
  'meta.example': ['169.254.169.254'],
  'mixed.example': ['93.184.216.34', 'fd12:3456::7'],
};
const resolve: Resolver = async (host) => {
  if (DNS[host]) return DNS[host];
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

describe('bad_url messages', () => {
  it('name the rule that failed without revealing a resolved address or its range', async () => {
    const stack = await startWebhookStack({ resolve });
    const { apiKey: key } = await partnerFactory(stack.api.deps.sql);
    for (const host of Object.keys(DNS)) {
      const res = await stack.api.request('PUT', '/webhook', { key, body: { url: `https://${host}/hook` } });
      expect(res.status, host).toBe(400);
      expect(res.body.detail.code).toBe('bad_url');
      expect(res.body.detail.message).toContain('resolves to an address that is not public');
      for (const a of DNS[host]) expect(res.body.detail.message).not.toContain(a);
      expect(res.body.detail.message).not.toMatch(/\d+\.\d+\.\d+\.\d+|private|loopback|linkLocal|uniqueLocal/i);
    }
    // a rule without DNS still says what failed, and a literal the partner typed may be named
    const plain = await stack.api.request('PUT', '/webhook', { key, body: { url: 'http://public.example/' } });
    expect(plain.body.detail.message).toContain('must use https://');
    const literal = await stack.api.request('PUT', '/webhook', { key, body: { url: 'https://10.0.0.1/' } });
    expect(literal.body.detail.message).toContain('10.0.0.1 is not a public address');
  });
});
