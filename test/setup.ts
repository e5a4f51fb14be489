import { afterAll } from 'vitest';
import { runFileEnd } from './helpers/fileEnd.js';

// A setup file runs for every test file, also in a worker that ran others before it.
afterAll(runFileEnd);
