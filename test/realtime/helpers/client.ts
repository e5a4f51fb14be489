import WebSocket from 'ws';

export interface Received {
  type: string;
  [k: string]: any;
}

/**
 * A `ws` participant client that records every frame, with waits that fail
 * with a clear message instead of hanging.
 */
export class TestClient {
  readonly messages: Received[] = [];
  closeCode: number | undefined;
  closeReason = '';
  readonly ws: WebSocket;
  private waiters: (() => void)[] = [];
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;
  /** HTTP status when the upgrade was refused */
  refusedStatus: number | undefined;

  constructor(url: string, options: WebSocket.ClientOptions = {}) {
    this.ws = new WebSocket(url, options);
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('unexpected-response', (_req, res) => {
        this.refusedStatus = res.statusCode;
        reject(new Error(`upgrade refused with ${res.statusCode}`));
      });
      this.ws.once('error', reject);
    });
    this.opened.catch(() => undefined);
    this.closed = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        this.notify();
        resolve(code);
      });
    });
    this.ws.on('message', (data, isBinary) => {
      if (!isBinary) this.messages.push(JSON.parse(data.toString()));
      this.notify();
    });
    this.ws.on('error', () => undefined);
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  of(type: string): Received[] {
    return this.messages.filter((m) => m.type === type);
  }

  async waitFor(pred: (m: Received) => boolean, what = 'message', timeoutMs = 5000): Promise<Received> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(pred);
      if (found) return found;
      if (Date.now() > deadline) {
        const closed = this.closeCode !== undefined ? ` (closed ${this.closeCode} ${this.closeReason})` : '';
        throw new Error(`timed out waiting for ${what}${closed}; got ${JSON.stringify(this.messages.slice(-5))}`);
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  waitType(type: string, timeoutMs?: number): Promise<Received> {
    return this.waitFor((m) => m.type === type, type, timeoutMs);
  }

  async welcome(timeoutMs?: number): Promise<Received> {
    return this.waitType('welcome', timeoutMs);
  }

  async waitClosed(timeoutMs = 5000): Promise<number> {
    return Promise.race([
      this.closed,
      new Promise<number>((_, rej) => setTimeout(() => rej(new Error('timed out waiting for close')), timeoutMs)),
    ]);
  }

  /**
   * Pings the gateway and waits for its pong: a sign of life at the gateway's clock now. A test
   * that moves the clock past a keepalive cycle and flushes calls it for the clients that would
   * have answered the gateway's pings meanwhile (a flush charges no further than one cycle after
   * a socket's last sign of life: realtime/metering/Certainty.ts).
   */
  alive(timeoutMs = 5000): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('timed out waiting for a pong')), timeoutMs);
      this.ws.once('pong', () => {
        clearTimeout(t);
        resolve();
      });
      this.ws.ping();
    });
  }

  close(): Promise<number> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000);
    return this.closed;
  }

  private notify(): void {
    const w = this.waiters.splice(0);
    for (const f of w) f();
  }
}

/**
 * Opens a client and waits for its welcome. The wait is generous (15 s): the
 * tests with real gateway processes share two cores with every other test
 * file; latency is measured by the load test, not here.
 */
export async function join(url: string, options?: WebSocket.ClientOptions): Promise<TestClient> {
  const c = new TestClient(url, options);
  await c.opened;
  await c.welcome(15_000);
  return c;
}
