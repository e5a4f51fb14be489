import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The one root logger. Parts of the service take `logger.child({ component })`.
 * Secrets never reach a log line: the redaction list below is the backstop, and
 * code never logs tokens, keys, secrets or partners' user ids in the first place.
 */
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  '*.authorization',
  'api_key',
  '*.api_key',
  'token',
  '*.token',
  'secret',
  '*.secret',
  'user.id',
  '*.user.id',
  'url_token',
];

export function createLogger(level: string = 'info', destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
