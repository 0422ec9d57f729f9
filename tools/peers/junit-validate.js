// Validates a JUnit XML report against the Apache Ant JUnit schema
// (Windy Road, Apache License 2.0), the XSD CI systems' JUnit readers are
// built around, with libxml2 (xmllint-wasm). The schema is read at run
// time from the junit-xml package, which ships it in its own tests.
//
// Exit 0: valid. Exit 1: invalid, libxml2's errors on stderr. Exit 2:
// usage, or the schema could not be found.
'use strict';
const fs = require('fs');
const path = require('path');
const { validateXML } = require('xmllint-wasm');

// antJUnitSchema returns the XSD held as the string constant
// antJunitSchema in junit-xml's src/index.test.ts.
function antJUnitSchema() {
  const src = path.join(path.dirname(require.resolve('junit-xml/package.json')), 'src', 'index.test.ts');
  const text = fs.readFileSync(src, 'utf8');
  const m = /const antJunitSchema = '((?:[^'\\]|\\.)*)';/.exec(text);
  if (!m) {
    throw new Error(`no antJunitSchema constant in ${src}; was junit-xml upgraded?`);
  }
  // A single-quoted TypeScript literal: only backslash escapes to undo.
  const xsd = m[1].replace(/\\(.)/g, '$1');
  if (!xsd.includes('<xs:element name="testsuites">')) {
    throw new Error(`antJunitSchema in ${src} is not the Ant JUnit XSD`);
  }
  return xsd;
}

async function main() {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node junit-validate.js REPORT.xml');
    process.exit(2);
  }
  let schema;
  try {
    schema = antJUnitSchema();
  } catch (err) {
    console.error(`junit-validate: ${err.message}`);
    process.exit(2);
  }
  const result = await validateXML({
    xml: [{ fileName: path.basename(file), contents: fs.readFileSync(file, 'utf8') }],
    schema: [schema],
  });
  if (!result.valid) {
    // rawOutput is libxml2's own report (file:line: element ...: message).
    console.error(result.rawOutput.trim() || result.errors.map((e) => e.rawMessage).join('\n'));
    process.exit(1);
  }
}

main().catch((err) => {
  console.error(`junit-validate: ${err.stack || err}`);
  process.exit(2);
});
