import type { Reporter, TestModule } from 'vitest/node';

/** Prints the closing line CI reads: `N passed, N failed` (", N skipped" when any). */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of testModules) {
      let failedHere = 0;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      // a file that failed to load, or whose beforeAll/afterAll threw (its tests then show as
      // skipped), has no failed test of its own but must count as a failure
      if (m.state() === 'failed' && failedHere === 0) failedHere = 1;
      failed += failedHere;
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
