import { randomBytes } from 'node:crypto';
import net from 'node:net';

/**
 * The load generator's WebSocket client when `--client lean` (the default): the least a client can
 * do and still be one (RFC 6455 over a plain TCP socket), so that the load generator, which shares
 * this 2-core machine with the servers it measures, takes less of it than they do.
 *
 * Why not `ws` (kept as `--client ws`): at 1,000 joins/s its clients took 0.6-0.8 ms of CPU per
 * join, more than the gateway itself (0.46-0.57 ms), spread over Node's http client (an agent, a
 * ClientRequest and the HTTP parser for one 101 reply), the key's SHA-1 check, a stream Receiver and
 * an EventEmitter per socket. No library does less: the well-kept clients (`ws`, undici's WebSocket)
 * are browsers' equivalents, complete and checked; a load generator needs the frames only.
 *
 * What it does: the upgrade request written in one go and its reply's status line read (the
 * Sec-WebSocket-Accept is not checked: the servers are ours); text frames in (any length, split over
 * TCP reads or not; fragments joined), pings answered, the close handshake; text frames out, masked
 * (the RFC requires it of a client: one key per socket). No extensions (no permessage-deflate,
 * as the `ws` clients were started without it), no binary frames (nothing here sends them).
 */
export const CONNECTING = 0;
export const OPEN = 1;
export const CLOSING = 2;
export const CLOSED = 3;

const KEY = randomBytes(16).toString('base64');

export interface LeanHandlers {
  message(text: string): void;
  /** the upgrade was answered with another status than 101 (the socket is then closed, no `close`) */
  refused(status: number): void;
  error(err: NodeJS.ErrnoException): void;
  /** the close frame's code, or 1006 when the TCP connection ended without one */
  close(code: number): void;
}

export class LeanWebSocket {
  readyState = CONNECTING;
  private readonly socket: net.Socket;
  /** bytes read but not yet used (a frame, or the upgrade's answer, not whole yet) */
  private waiting: Buffer[] = [];
  private waited = 0;
  /** how many bytes `waiting` must hold before it is worth reading again: a frame split over many reads is joined once */
  private need = 0;
  private fragments: Buffer[] | undefined;
  /** the key that masks this socket's frames (RFC 6455 5.3): not a secret here, so no crypto call per socket */
  private readonly mask = Buffer.allocUnsafe(4);
  private closeCode = 1006;
  private done = false;

  constructor(url: string, localAddress: string, private readonly on: LeanHandlers) {
    // ws://host:port/path?query
    const rest = url.slice(url.indexOf('//') + 2);
    const slash = rest.indexOf('/');
    const hostPort = rest.slice(0, slash);
    const colon = hostPort.lastIndexOf(':');
    const host = hostPort.slice(0, colon);
    const port = Number(hostPort.slice(colon + 1));
    this.mask.writeUInt32BE((Math.random() * 2 ** 32) >>> 0);
    this.socket = net.connect({ host, port, localAddress });
    this.socket.setNoDelay(true);
    this.socket.write(
      `GET ${rest.slice(slash)} HTTP/1.1\r\nHost: ${hostPort}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    this.socket.on('data', (chunk: Buffer) => this.data(chunk));
    this.socket.on('error', (e) => {
      if (!this.done) this.on.error(e);
    });
    this.socket.on('close', () => this.ended());
  }

  send(text: string): void {
    if (this.readyState === OPEN) this.frame(0x1, text);
  }

  /** Starts the close handshake; `close` is reported when the server's close frame or the TCP end arrives. */
  close(code = 1000): void {
    if (this.readyState !== OPEN) return;
    this.readyState = CLOSING;
    const body = Buffer.allocUnsafe(2);
    body.writeUInt16BE(code);
    this.frame(0x8, body);
  }

  /** Writes one frame; a text payload is encoded straight into it and masked in place. */
  private frame(opcode: number, payload: Buffer | string): void {
    const n = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
    const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
    const out = Buffer.allocUnsafe(head + 4 + n);
    out[0] = 0x80 | opcode;
    if (n < 126) out[1] = 0x80 | n;
    else if (n < 65536) {
      out[1] = 0x80 | 126;
      out.writeUInt16BE(n, 2);
    } else {
      out[1] = 0x80 | 127;
      out.writeBigUInt64BE(BigInt(n), 2);
    }
    this.mask.copy(out, head);
    const at = head + 4;
    if (typeof payload === 'string') out.write(payload, at);
    else payload.copy(out, at);
    const m = this.mask;
    for (let i = 0; i < n; i++) out[at + i] ^= m[i & 3];
    this.socket.write(out);
  }

  private data(chunk: Buffer): void {
    let buf = chunk;
    if (this.waited > 0) {
      this.waiting.push(chunk);
      this.waited += chunk.length;
      if (this.waited < this.need) return;
      buf = Buffer.concat(this.waiting, this.waited);
      this.waiting = [];
      this.waited = 0;
    }
    if (this.readyState === CONNECTING) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        this.wait(buf, buf.length + 1);
        return;
      }
      // "HTTP/1.1 101 Switching Protocols"
      const status = Number(buf.toString('latin1', 9, 12));
      if (status !== 101) {
        this.done = true;
        this.readyState = CLOSED;
        this.socket.destroy();
        this.on.refused(status);
        return;
      }
      this.readyState = OPEN;
      buf = buf.subarray(end + 4);
    }
    let at = 0;
    // the bytes from `at` the next frame needs before it can be read
    let want = 2;
    while (buf.length - at >= 2) {
      const b0 = buf[at];
      const b1 = buf[at + 1];
      let len = b1 & 0x7f;
      let p = at + 2;
      if (len === 126) {
        want = 4;
        if (buf.length - p < 2) break;
        len = buf.readUInt16BE(p);
        p += 2;
      } else if (len === 127) {
        want = 10;
        if (buf.length - p < 8) break;
        len = Number(buf.readBigUInt64BE(p));
        p += 8;
      }
      if ((b1 & 0x80) !== 0) {
        // a server never masks its frames (RFC 6455 5.1): the stream cannot be read further
        this.socket.destroy(new Error('masked frame from the server'));
        return;
      }
      if (buf.length - p < len) {
        want = p + len - at;
        break;
      }
      at = p + len;
      want = 2;
      this.opcode(b0 & 0x0f, (b0 & 0x80) !== 0, buf.subarray(p, at));
      if (this.done) return;
    }
    if (at < buf.length) this.wait(Buffer.from(buf.subarray(at)), want);
  }

  /** Keeps the start of what is not whole yet, until `need` bytes are there in all. */
  private wait(start: Buffer, need: number): void {
    this.waiting.push(start);
    this.waited = start.length;
    this.need = need;
  }

  private opcode(op: number, fin: boolean, payload: Buffer): void {
    switch (op) {
      case 0x0: // continuation
      case 0x1: // text
        if (!fin || this.fragments) {
          (this.fragments ??= []).push(Buffer.from(payload));
          if (!fin) return;
          const whole = Buffer.concat(this.fragments);
          this.fragments = undefined;
          this.on.message(whole.toString());
        } else this.on.message(payload.toString());
        return;
      case 0x8: // close: answer it (unless we started it), then end the TCP connection
        this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        if (this.readyState === OPEN) {
          this.readyState = CLOSING;
          this.frame(0x8, payload.subarray(0, 2));
        }
        this.socket.end();
        return;
      case 0x9: // ping
        if (this.readyState === OPEN) this.frame(0xa, payload);
        return;
      default: // pong, binary: nothing here needs them
        return;
    }
  }

  private ended(): void {
    if (this.done) return;
    this.done = true;
    this.readyState = CLOSED;
    this.on.close(this.closeCode);
  }
}
