/** The longest request id taken from a trusted proxy's `X-Request-Id`. */
export const MAX_REQUEST_ID_LENGTH = 128;
const SAFE = /^[A-Za-z0-9._:@=+\/-]+$/;

/**
 * A request id given by our own proxy, if it is one we may log and echo: at most
 * MAX_REQUEST_ID_LENGTH characters of a safe set (letters, digits and `._:@=+/-`; no spaces,
 * quotes or control characters, so it cannot forge a log field or a header). Else undefined
 * and the API makes its own. Only called when TRUST_PROXY_HOPS > 0: without a proxy of ours in
 * front, the header is the client's and is ignored.
 */
export function requestIdFrom(header: string): string | undefined {
  return header.length > 0 && header.length <= MAX_REQUEST_ID_LENGTH && SAFE.test(header) ? header : undefined;
}
