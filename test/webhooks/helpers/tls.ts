import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Certificates for loopback HTTPS receivers, made with the openssl CLI at test
 * time: one throw-away CA per process, and leaf certificates signed by it for
 * the names/IPs a test asks for. The sender trusts the CA through the test-only
 * `ca` runtime option (src/webhooks/runtime.ts).
 */
export interface TestCert {
  key: string;
  cert: string;
}

let ca: { dir: string; cert: string; keyFile: string; certFile: string } | undefined;

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

export function testCa(): string {
  if (!ca) {
    const dir = mkdtempSync(path.join(tmpdir(), 'wh-ca-'));
    openssl(
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt',
        '-days', '2', '-subj', '/CN=Webhook test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
      dir,
    );
    ca = { dir, cert: readFileSync(path.join(dir, 'ca.crt'), 'utf8'), keyFile: 'ca.key', certFile: 'ca.crt' };
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return ca.cert;
}

/** A leaf certificate for `names` (DNS names and IP addresses), signed by the test CA. */
export function leafCert(names: string[]): TestCert {
  testCa();
  const dir = ca!.dir;
  const id = Math.random().toString(36).slice(2);
  const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  writeFileSync(path.join(dir, `${id}.ext`), `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${id}.key`, '-out', `${id}.csr`, '-subj', `/CN=${names[0]}`], dir);
  openssl(['x509', '-req', '-in', `${id}.csr`, '-CA', ca!.certFile, '-CAkey', ca!.keyFile, '-CAcreateserial', '-out', `${id}.crt`, '-days', '2', '-extfile', `${id}.ext`], dir);
  return { key: readFileSync(path.join(dir, `${id}.key`), 'utf8'), cert: readFileSync(path.join(dir, `${id}.crt`), 'utf8') };
}
