#!/usr/bin/env node
// The golden cases through the OFFICIAL npm `jsonata` package (as published: asynchronous) under
// Node: the reference side of the differential test. golden_test.cc runs the same file through
// the embedded, synchronous engine; both must give every case's expected output.
//
//   node golden_node.js <golden.json> <node_modules/jsonata/jsonata.js> [more.json ...]
//
// More files (QueueBox's documented examples, tests/vendor/queuebox/transform_examples.json) run
// after the golden cases, in the same way; only golden.json needs 300 cases.
//
// Mirrors the engine: maxDepth is jsonata's `stack` option (default 100), the input and the
// bindings go through JSON text, and functions serialize as no value (src/transform/js/driver.js).
'use strict';
const fs = require('fs');
const path = require('path');

const [goldenPath, jsonataArg, ...morePaths] = process.argv.slice(2);
if (!goldenPath || !jsonataArg) {
  process.stderr.write('usage: golden_node.js <golden.json> <jsonata.js>\n');
  process.exit(2);
}
const jsonataPath = path.resolve(jsonataArg);
const jsonata = require(jsonataPath);
const cases = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));
const more = morePaths.map((p) => JSON.parse(fs.readFileSync(p, 'utf8')));

function withoutFunctions(key, value) {
  if (typeof value === 'function') return undefined;
  if (value !== null && typeof value === 'object' &&
      (value._jsonata_lambda === true || value._jsonata_function === true)) {
    return undefined;
  }
  return value;
}

async function run(c) {
  const input = c.input === undefined ? undefined : JSON.parse(JSON.stringify(c.input));
  const bindings = c.bindings === undefined ? undefined : JSON.parse(JSON.stringify(c.bindings));
  try {
    const expr = jsonata(c.expr, {stack: c.maxDepth || 100});
    const result = await expr.evaluate(input, bindings);
    const text = result === undefined ? undefined : JSON.stringify(result, withoutFunctions);
    return {text};
  } catch (err) {
    return {error: err};
  }
}

function check(c, got) {
  if (c.error !== undefined) {
    if (!got.error) return `expected error ${c.error}, got ${got.text}`;
    const e = got.error;
    if (e.code !== c.error) return `expected error ${c.error}, got ${e.code}: ${e.message}`;
    if (c.position !== undefined && e.position !== c.position) {
      return `expected position ${c.position}, got ${e.position}`;
    }
    if (c.message !== undefined && e.message !== c.message) {
      return `expected message ${JSON.stringify(c.message)}, got ${JSON.stringify(e.message)}`;
    }
    return null;
  }
  if (got.error) return `unexpected error ${got.error.code}: ${got.error.message}`;
  if (c.undefined) return got.text === undefined ? null : `expected no value, got ${got.text}`;
  if (got.text === undefined) return `no value; expected ${JSON.stringify(c.result)}`;
  // Key order counts: compare the JSON text of both values.
  const want = JSON.stringify(c.result);
  const have = JSON.stringify(JSON.parse(got.text));
  return want === have ? null : `got ${got.text}, expected ${want}`;
}

async function runFile(list, label) {
  let passed = 0;
  let failed = 0;
  const names = new Set();
  for (const c of list) {
    let problem = names.has(c.name) ? 'duplicate name' : null;
    names.add(c.name);
    if (!problem) problem = check(c, await run(c));
    if (problem) {
      failed++;
      process.stdout.write(`FAIL ${c.name}: ${c.expr}\n  ${problem}\n`);
    } else {
      passed++;
    }
  }
  process.stdout.write(`${label} (npm jsonata ${require(path.join(path.dirname(jsonataPath), 'package.json')).version} ` +
                       `under Node ${process.version}): ${list.length} cases\n`);
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  return failed;
}

(async () => {
  let failed = await runFile(cases, 'golden');
  if (cases.length < 300) {
    failed++;
    process.stdout.write(`FAIL only ${cases.length} cases; the suite needs at least 300\n`);
  }
  for (let i = 0; i < more.length; i++) failed += await runFile(more[i], path.basename(morePaths[i]));
  process.exit(failed === 0 ? 0 : 1);
})();
