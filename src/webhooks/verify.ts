/**
 * The receiver-side signature check lives in the typed client
 * (clients/ts/src/verify.ts), which partners use or copy; the service's tests
 * import it from here.
 */
export * from '../../clients/ts/src/verify.js';
