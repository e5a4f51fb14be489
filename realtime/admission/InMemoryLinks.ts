import { linkTokenHash, type ResolvedLink } from '../../src/domain/links.js';
import type { LinkSource } from './LinkSource.js';

/** Links held in the process (the gateway core without a database): `issue` stores one and tells a listening Admission, as link_issued does. */
export class InMemoryLinks implements LinkSource {
  private readonly byHash = new Map<string, ResolvedLink>();
  private readonly listeners = new Set<(hash: string, link: ResolvedLink) => void>();

  issue(token: string, link: ResolvedLink): void {
    const hash = linkTokenHash(token);
    if (!hash) throw new Error('not a link token');
    const key = hash.toString('base64');
    this.byHash.set(key, link);
    for (const l of this.listeners) l(key, { ...link });
  }

  async resolve(hashes: Buffer[]): Promise<(ResolvedLink | undefined)[]> {
    return hashes.map((h) => {
      const link = this.byHash.get(h.toString('base64'));
      return link && { ...link };
    });
  }

  async listen(issued: (hash: string, link: ResolvedLink) => void, reconnected: () => void): Promise<() => Promise<void>> {
    reconnected();
    this.listeners.add(issued);
    return async () => void this.listeners.delete(issued);
  }
}
