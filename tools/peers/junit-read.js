// Reads a JUnit XML report with test-results-parser, the reader CI
// reporting tools use, and prints what it sees as JSON: the totals and
// every case's status. mcpx's tests compare that with what the report
// was meant to say.
'use strict';
const path = require('path');
const { parse } = require('test-results-parser');

const file = process.argv[2];
if (!file) {
  console.error('usage: node junit-read.js REPORT.xml');
  process.exit(2);
}
const r = parse({ type: 'junit', files: [path.resolve(file)] });
const out = {
  total: r.total, passed: r.passed, failed: r.failed, skipped: r.skipped, status: r.status,
  suites: r.suites.map((s) => ({
    name: s.name, total: s.total, passed: s.passed, failed: s.failed, skipped: s.skipped, status: s.status,
    cases: s.cases.map((c) => ({ name: c.name, status: c.status, failure: c.failure || '' })),
  })),
};
console.log(JSON.stringify(out));
