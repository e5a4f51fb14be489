import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AddressRejected, checkWebhookUrl, type Resolver } from '../../src/webhooks/address.js';
import { startDispatcher } from '../../src/webhooks/index.js';
import { buildWebhookRuntime } from '../../src/webhooks/runtime.js';
import { makeDeps } from '../helpers/deps.js';
import { leafCert, testCa } from './helpers/tls.js';
import { startReceiver } from './helpers/receiver.js';
import { eventually } from '../helpers/wait.js';
import { attemptsOf, loopbackResolver, startWebhookStack } from './helpers/stack.js';
import { apiError } from '../helpers/api.js';

/** DNS of the SSRF table. */
const DNS: Record<string, string[]> = {
  'public.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.example': ['10.0.0.5'],
  'metadata.example': ['169.254.169.254'],
  'mixed.example': ['93.184.216.34', 'fd00::1'], // A public, AAAA private
  'mixed6.example': ['93.184.216.34', '::1'],
  'mapped.example': ['::ffff:10.0.0.1'],
  'nat64.example': ['64:ff9b::a00:1'],
  'empty.example': [],
};
const calls: string[] = [];
const tableResolver: Resolver = async (host) => {
  calls.push(host);
  const a = DNS[host];
  if (!a) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  return a;
};
const policy = { allowHosts: [] as string[], resolve: tableResolver };

const REJECTED = [
  // scheme, length, credentials, syntax
  'http://public.example/',
  'ftp://public.example/',
  'https://user:pass@public.example/',
  'https://user@public.example/',
  `https://public.example/${'a'.repeat(2048)}`,
  'not a url',
  '/relative/path',
  'https://',
  // loopback in every notation
  'https://127.0.0.1/',
  'https://2130706433/',
  'https://0x7f.1/',
  'https://127.1/',
  'https://0177.0.0.1/',
  'https://0x7f000001/',
  'https://[::1]/',
  'https://[::ffff:127.0.0.1]/',
  'https://[::ffff:7f00:1]/',
  'https://[::127.0.0.1]/', // IPv4-compatible
  'https://localhost/',
  'https://LOCALHOST./',
  'https://api.localhost/',
  // private, link-local, CGNAT, unspecified, multicast, broadcast, documentation, benchmarking, reserved
  'https://10.1.2.3/',
  'https://172.16.0.1/',
  'https://192.168.1.1/',
  'https://169.254.169.254/',
  'https://100.64.0.1/',
  'https://0.0.0.0/',
  'https://0/',
  'https://224.0.0.1/',
  'https://255.255.255.255/',
  'https://192.0.2.10/',
  'https://198.51.100.10/',
  'https://203.0.113.10/',
  'https://198.18.0.1/',
  'https://240.0.0.1/',
  'https://192.0.0.1/',
  // IPv6 special ranges
  'https://[::]/',
  'https://[fc00::1]/',
  'https://[fd12:3456::1]/',
  'https://[fe80::1]/',
  'https://[ff02::1]/',
  'https://[2001:db8::1]/',
  'https://[64:ff9b::a00:1]/', // NAT64
  'https://[2002:a00:1::]/', // 6to4
  'https://[2001:0:4136:e378::1]/', // Teredo
  'https://[100::1]/', // discard-only
  // names that resolve to internal addresses, partly or wholly, or not at all
  'https://internal.example/',
  'https://metadata.example/',
  'https://mixed.example/',
  'https://mixed6.example/',
  'https://mapped.example/',
  'https://nat64.example/',
  'https://empty.example/',
  'https://nx.example/',
];

const ACCEPTED: [string, string][] = [
  ['https://public.example/hooks?x=1', '93.184.216.34'],
  ['https://PUBLIC.example.:8443/', '93.184.216.34'],
  ['https://93.184.216.34/', '93.184.216.34'],
  ['https://[2606:4700:4700::1111]/in', '2606:4700:4700::1111'],
];

describe('address rules (SSRF table, injected resolver)', () => {
  it.each(REJECTED)('refuses %s', async (url) => {
    await expect(checkWebhookUrl(url, policy)).rejects.toBeInstanceOf(AddressRejected);
  });

  it.each(ACCEPTED)('accepts %s and pins %s', async (url, pinned) => {
    const t = await checkWebhookUrl(url, policy);
    expect(t.pinned).toBe(pinned);
  });

  it('checks every resolved address, not only the first', async () => {
    await expect(checkWebhookUrl('https://mixed.example/', policy)).rejects.toThrow(/resolves to an address that is not public/); // the first is public: the second was checked
  });

  it('never asks DNS about localhost names or literal addresses', async () => {
    calls.length = 0;
    for (const url of ['https://localhost/', 'https://a.localhost/', 'https://127.1/', 'https://[::1]/', 'https://93.184.216.34/']) {
      await checkWebhookUrl(url, policy).catch(() => {});
    }
    expect(calls).toEqual([]);
  });

  it('exempts WEBHOOK_ALLOW_HOSTS from the https and public-address rules only', async () => {
    const allow = { allowHosts: ['127.0.0.1', 'internal.example', '[::1]'], resolve: tableResolver };
    expect((await checkWebhookUrl('http://127.0.0.1:8080/', allow)).pinned).toBe('127.0.0.1');
    expect((await checkWebhookUrl('https://2130706433/', allow)).pinned).toBe('127.0.0.1');
    expect((await checkWebhookUrl('https://[::1]:9/', allow)).pinned).toBe('::1');
    expect((await checkWebhookUrl('https://internal.example/', allow)).pinned).toBe('10.0.0.5');
    await expect(checkWebhookUrl('https://u:p@127.0.0.1/', allow)).rejects.toBeInstanceOf(AddressRejected);
    await expect(checkWebhookUrl('https://metadata.example/', allow)).rejects.toBeInstanceOf(AddressRejected);
  });
});

describe('address rules at PUT /webhook and at every attempt', () => {
  let dnsCalls = 0;
  let rebindCalls = 0;
  const resolve: Resolver = async (host) => {
    dnsCalls++;
    if (host === 'rebind.example') return rebindCalls++ === 0 ? ['93.184.216.34'] : ['127.0.0.1'];
    if (DNS[host]) return tableResolver(host);
    return loopbackResolver(host);
  };

  it('answers 400 bad_url to a refused address and keeps the webhook as it was', async () => {
    const stack = await startWebhookStack({ resolve, env: { WEBHOOK_ALLOW_HOSTS: 'hook.test' } });
    await stack.dispatcher();
    const rx = await startReceiver({ name: 'hook.test' });
    const p = await stack.partnerWithWebhook(rx.url);
    for (const url of ['http://public.example/', 'https://2130706433/', 'https://[::ffff:127.0.0.1]/', 'https://localhost/', 'https://mixed.example/', 'https://nx.example/', `https://public.example/${'a'.repeat(2048)}`, 'junk']) {
      const res = await stack.api.request('PUT', '/webhook', { key: p.apiKey, body: { url } });
      expect(res.status, url).toBe(400);
      expect(res.body).toEqual(apiError('bad_url'));
    }
    for (const body of [{}, { url: 42 }, { url: null }]) {
      const res = await stack.api.request('PUT', '/webhook', { key: p.apiKey, body });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body', 'url']);
    }
    const ev = await stack.record(p.partner.id);
    const [req] = await rx.waitFor(1);
    expect(req.body.id).toBe(ev.id);
    await rx.close();
  });

  it('re-checks at every attempt: a name that resolves to loopback the second time is never connected to', async () => {
    const stack = await startWebhookStack({ resolve });
    await stack.dispatcher();
    const rx = await startReceiver({ name: 'rebind.example' });
    const p = await stack.partnerWithWebhook(`https://rebind.example:${rx.port}/`); // checked once: public
    const ev = await stack.record(p.partner.id);
    const [a] = await eventually(async () => { const l = await attemptsOf(stack.sql, ev.id); return l.length > 0 && l; });
    expect(a.error).toBe('address_rejected: the host name resolves to an address that is not public');
    expect(a.address).toBeNull();
    expect(rx.requests).toHaveLength(0);
    await rx.close();
  });

  it('connects to the checked address only (one resolution per attempt), with the host name for SNI and the certificate', async () => {
    const stack = await startWebhookStack({ resolve });
    await stack.dispatcher();
    // hook.test exists only in the injected resolver; the certificate names hook.test, not 127.0.0.1
    const rx = await startReceiver({ name: 'hook.test', cert: leafCert(['hook.test']) });
    const p = await stack.partnerWithWebhook(`https://hook.test:${rx.port}/in`);
    const before = dnsCalls;
    const ev = await stack.record(p.partner.id);
    const [req] = await rx.waitFor(1);
    expect(req.body.id).toBe(ev.id);
    expect(req.headers.host).toBe(`hook.test:${rx.port}`);
    expect(req.sni).toBe('hook.test');
    expect(dnsCalls - before).toBe(1);
    await rx.close();
  });

  it('fails the attempt when the certificate at the pinned address is for another name', async () => {
    const stack = await startWebhookStack({ resolve });
    await stack.dispatcher();
    const rx = await startReceiver({ name: 'hook.test', cert: leafCert(['other.test', '127.0.0.1']) });
    const p = await stack.partnerWithWebhook(`https://hook.test:${rx.port}/`);
    const ev = await stack.record(p.partner.id);
    const [a] = await eventually(async () => { const l = await attemptsOf(stack.sql, ev.id); return l.length > 0 && l; });
    expect(a).toMatchObject({ delivered: false, status_code: null, error: 'tls_error: ERR_TLS_CERT_ALTNAME_INVALID', address: '127.0.0.1' });
    expect(rx.requests).toHaveLength(0);
    await rx.close();
  });

  it('fails the attempt when the certificate does not chain to a trusted CA', async () => {
    const stack = await startWebhookStack({ resolve });
    await stack.dispatcher({ ca: undefined }); // Node's default store: the test CA is unknown there
    const rx = await startReceiver({ name: 'hook.test' });
    const p = await stack.partnerWithWebhook(`https://hook.test:${rx.port}/`);
    const ev = await stack.record(p.partner.id);
    const [a] = await eventually(async () => { const l = await attemptsOf(stack.sql, ev.id); return l.length > 0 && l; });
    expect(a).toMatchObject({ delivered: false, status_code: null, error: expect.stringMatching(/^tls_error: /) });
    expect(rx.requests).toHaveLength(0);
    await rx.close();
  });
});

describe('WEBHOOK_ALLOW_HOSTS warning', () => {
  it('is logged when a dispatcher starts with allowed hosts, and not otherwise', async () => {
    const stack = await startWebhookStack();
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
    for (const allow of ['127.0.0.1', '']) {
      const base = makeDeps({ env: { ...stack.env, WEBHOOK_ALLOW_HOSTS: allow } });
      const deps = { ...base, log: pino({ level: 'info' }, sink), webhookRuntime: buildWebhookRuntime(base.config, { ca: testCa() }) };
      const d = await startDispatcher(deps);
      await d.close();
      await base.close();
      const warned = lines.some((l) => l.includes('WEBHOOK_ALLOW_HOSTS') && JSON.parse(l).level === 40);
      expect(warned, `allow=${allow}`).toBe(allow !== '');
      lines.length = 0;
    }
  });
});
