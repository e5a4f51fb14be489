import { afterAll, describe, expect, it, vi } from 'vitest';
import { resolveLinkToken, type ResolvedLink } from '../../src/domain/links.js';
import { randomBase62 } from '../../src/lib/crypto.js';
import { Admission } from '../../realtime/admission/Admission.js';
import { InMemoryLinks } from '../../realtime/admission/InMemoryLinks.js';
import { postgresLinks, type LinkSource } from '../../realtime/admission/LinkSource.js';
import { makeDeps, ManualClock } from '../helpers/deps.js';
import { lessonWithLinks, resolvedLink } from './helpers/fixtures.js';

/**
 * Admission's link check over both link sources: Postgres (the links table,
 * link_issued) and InMemoryLinks (the gateway core's unit tests). The checks
 * at the upgrade itself (Origin, caps, the HTTP answers): upgrade.test.ts.
 */
const clock = new ManualClock();
const deps = makeDeps({ clock });
afterAll(() => deps.close());

interface LinksHarness {
  source: LinkSource;
  /** issues a link of a new lesson valid for `ttlMinutes`; its token and the link as a lookup resolves it */
  issue(ttlMinutes?: number): Promise<{ token: string; link: ResolvedLink }>;
}

function admissionSuite(name: string, harness: () => LinksHarness): void {
  describe(`admission's link check (${name})`, () => {
    it('admits a link by its token, and refuses an unknown or expired one (401) and a deleted lesson\'s (410)', async () => {
      const { source, issue } = harness();
      const admission = new Admission(deps, source);
      const { token, link } = await issue(10);
      expect(await admission.checkLink(token)).toMatchObject({ ok: true, link: { link_id: link.link_id, lesson_id: link.lesson_id } });
      expect(await admission.checkLink(randomBase62(32))).toMatchObject({ ok: false, status: 401 });
      expect(await admission.checkLink('not a token')).toMatchObject({ ok: false, status: 401 });
      expect(await admission.checkLink(undefined)).toMatchObject({ ok: false, status: 401 });
      clock.advance(11 * 60_000);
      expect(await admission.checkLink(token)).toMatchObject({ ok: false, status: 401 });
      const other = await issue(10);
      admission.markArchived(other.link.lesson_id);
      expect(await admission.checkLink(other.token)).toMatchObject({ ok: false, status: 410 });
    });

    it('hears a link issued while it listens, so its first check needs no lookup', async () => {
      const { source, issue } = harness();
      const admission = new Admission(deps, source);
      await admission.start();
      const { token } = await issue();
      await vi.waitUntil(() => admission.cached(token, { heard: true }), { timeout: 5000 });
      const before = admission.lookupsMade;
      expect(await admission.checkLink(token)).toMatchObject({ ok: true });
      expect(admission.lookupsMade).toBe(before);
      await admission.stop();
      expect(admission.cached(token)).toBe(false);
    });
  });
}

admissionSuite('Postgres', () => ({
  source: postgresLinks(deps),
  issue: async (ttlMinutes = 180) => {
    const f = await lessonWithLinks(deps.sql);
    const token = await f.link(`u-${randomBase62(6)}`, { ttl: ttlMinutes, at: clock.now() });
    return { token, link: (await resolveLinkToken(deps.sql, token))! };
  },
}));

admissionSuite('in memory', () => {
  const links = new InMemoryLinks();
  return {
    source: links,
    issue: async (ttlMinutes = 180) => {
      const token = randomBase62(32);
      const link = resolvedLink({ expiresAt: new Date(clock.now().getTime() + ttlMinutes * 60_000) });
      links.issue(token, link);
      return { token, link };
    },
  };
});
