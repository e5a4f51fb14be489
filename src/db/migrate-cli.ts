import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { migrate } from './migrate.js';

const config = loadConfig();
const log = createLogger(config.LOG_LEVEL).child({ component: 'migrate' });
const applied = await migrate(config.DATABASE_URL, log);
log.info({ applied: applied.length }, 'migrations up to date');
