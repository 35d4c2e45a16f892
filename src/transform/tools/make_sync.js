#!/usr/bin/env node
// Build step: turns the npm `jsonata` bundle into a synchronous script and embeds it in C++.
//
//   node make_sync.js <jsonata package dir> <expected version> <driver.js> <out.cc> <out.js>
//
// jsonata 2.x evaluates with async/await, so every evaluation goes through promises. Nothing
// QueueBox binds is asynchronous, so the rewrite removes `async`, `await` and the
// `await Promise.all(...)` wrappers (5-10x faster in the embedded engine), the lookups of
// debugging hooks that no QueueBox binding can set (see 'hooks' below), and some per-evaluation
// allocations (see replaceBlock). The step FAILS when the bundle no longer has the shape it
// rewrites (a new jsonata version), when any async/await/Promise is left in executable code, or
// when the result does not evaluate synchronously under Node.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

function fail(message) {
  process.stderr.write(`make_sync: ${message}\n`);
  process.exit(1);
}

if (process.argv.length !== 7) {
  fail('usage: make_sync.js <package dir> <version> <driver.js> <out.cc> <out.js>');
}
const [packageDir, version, driverPath, outCc, outJs] = process.argv.slice(2);

const manifest = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
if (manifest.name !== 'jsonata' || manifest.version !== version) {
  fail(`expected jsonata ${version}, found ${manifest.name} ${manifest.version}`);
}
const original = fs.readFileSync(path.join(packageDir, 'jsonata.js'), 'utf8');

// Each rewrite must apply at least `min` times, or the bundle changed shape.
let source = original;
function rewrite(name, pattern, replacement, min) {
  let count = 0;
  source = source.replace(pattern, (...args) => {
    count++;
    return typeof replacement === 'function' ? replacement(...args) : replacement;
  });
  if (count < min) fail(`rewrite '${name}' applied ${count} times, expected at least ${min}`);
  return count;
}

// `await Promise.all(list.map(async (x) => ...))` evaluates in list order once synchronous;
// the parentheses stay, so the expression keeps its shape.
const promiseAll = rewrite('Promise.all', /\bawait\s+Promise\.all\s*\(/g, '(', 2);
const asyncFns = rewrite('async', /\basync\s+(?=function\b|\(|[A-Za-z_$][\w$]*\s*=>)/g, '', 40);
const awaits = rewrite('await', /\bawait\s+/g, '', 80);
// jsonata's debugging hooks are looked up by Symbol on every node it evaluates (entry and exit)
// and every frame it creates, each lookup walking the whole frame chain. QueueBox binds only JSON
// values (string names), so a symbol-named hook can never be bound: the lookups always give
// undefined. Replacing them by undefined halves a 30-field reshape (p50 190 -> 100 µs).
const hooks = rewrite('hooks',
    /\b(?:environment|enclosingEnvironment)\.lookup\(Symbol\.for\('jsonata\.__(?:evaluate_entry|evaluate_exit|createFrame_push)'\)\)/g,
    'undefined', 3);
if (hooks !== 3) fail(`rewrite 'hooks' applied ${hooks} times, expected exactly 3`);

// Allocations per evaluation: a 30-field reshape allocated ~85 KB of short-lived objects, so a
// minor collection fell every ~60 evaluations and set the p99 (bench/README.md, issue 16). Each
// rewrite below replaces one exact block (it must occur exactly once) by code with the same
// result that allocates less.
function replaceBlock(name, block, replacement) {
  const count = source.split(block).length - 1;
  if (count !== 1) fail(`rewrite '${name}' found its block ${count} times, expected exactly 1`);
  source = source.replace(block, () => replacement);
}
// evaluateStep flattens its results through two closures per step: plain loops, same order.
replaceBlock('flatten loops', `
            Array.prototype.forEach.call(result, function(res) {
                if (!Array.isArray(res) || res.cons) {
                    // it's not an array - just push into the result sequence
                    resultSequence.push(res);
                } else {
                    // res is a sequence - flatten it into the parent sequence
                    Array.prototype.forEach.call(res, val => resultSequence.push(val));
                }
            });`, `
            for (var qbI = 0; qbI < result.length; qbI++) {
                var qbRes = result[qbI];
                if (!Array.isArray(qbRes) || qbRes.cons) {
                    resultSequence.push(qbRes);
                } else {
                    for (var qbJ = 0; qbJ < qbRes.length; qbJ++) resultSequence.push(qbRes[qbJ]);
                }
            }`);
// evaluateName builds an object per name step only to give lookup a `this` with createSequence
// (all that lookup reads from it, recursion included); the evaluation's base frame has the same
// createSequence.
replaceBlock('name focus', `
        var focus = {
            createSequence: environment.base.createSequence
        };
        return fn.lookup.call(focus, input, expr.value);`, `
        return fn.lookup.call(environment.base, input, expr.value);`);
// A signature's validate runs its regular expression (no flags, so no lastIndex state) on the
// argument types' string at every call; the match only depends on that string and is only read,
// so it is kept per signature (at most 64 strings).
replaceBlock('signature matches', `
        var regex = new RegExp(regexStr);`, `
        var regex = new RegExp(regexStr);
        var qbMatches = new Map();`);
replaceBlock('signature match', `
                var isValid = regex.exec(suppliedSig);`, `
                var isValid = qbMatches.get(suppliedSig);
                if (isValid === undefined) {
                    isValid = regex.exec(suppliedSig);
                    if (qbMatches.size < 64) qbMatches.set(suppliedSig, isValid);
                }`);

// A small JavaScript lexer: yields identifier tokens of executable code with their neighbours,
// skipping comments, string and template literals and regular expression literals.
function* codeIdentifiers(text) {
  let i = 0;
  let prevSignificant = '';  // last non-space token (for the regex-or-division decision)
  const n = text.length;
  const isIdStart = (c) => /[A-Za-z_$]/.test(c);
  const isId = (c) => /[\w$]/.test(c);
  while (i < n) {
    const c = text[i];
    if (c === '/' && text[i + 1] === '/') {
      while (i < n && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) fail('unterminated comment');
      i = end + 2;
    } else if (c === '"' || c === "'" || c === '`') {
      i++;
      while (i < n && text[i] !== c) i += text[i] === '\\' ? 2 : 1;
      i++;
      prevSignificant = 'literal';
    } else if (c === '/') {
      const regexAllowed = prevSignificant === '' || /^[(,=:[!&|?{};+\-*%<>~^]$/.test(prevSignificant) ||
          ['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw']
              .includes(prevSignificant);
      if (regexAllowed) {
        i++;
        let inClass = false;
        while (i < n && (inClass || text[i] !== '/')) {
          if (text[i] === '\\') i++;
          else if (text[i] === '[') inClass = true;
          else if (text[i] === ']') inClass = false;
          else if (text[i] === '\n') fail(`unterminated regular expression near offset ${i}`);
          i++;
        }
        i++;
        while (i < n && isId(text[i])) i++;  // flags
        prevSignificant = 'literal';
      } else {
        i++;
        prevSignificant = '/';
      }
    } else if (isIdStart(c)) {
      let j = i;
      while (j < n && isId(text[j])) j++;
      const word = text.slice(i, j);
      let k = j;
      while (k < n && /\s/.test(text[k])) k++;
      yield {word, offset: i, prev: prevSignificant, next: text[k]};
      prevSignificant = word;
      i = j;
    } else if (/\s/.test(c)) {
      i++;
    } else if (/[0-9]/.test(c)) {
      while (i < n && /[\w.]/.test(text[i])) i++;
      prevSignificant = 'literal';
    } else {
      prevSignificant = c;
      i++;
    }
  }
}

for (const token of codeIdentifiers(source)) {
  if (token.word !== 'async' && token.word !== 'await' && token.word !== 'Promise') continue;
  // A property name (`async: false`) or a member (`env.async`) is data, not syntax.
  if (token.next === ':' || token.prev === '.') continue;
  const line = source.slice(0, token.offset).split('\n').length;
  fail(`'${token.word}' left in executable code at line ${line} of the rewritten bundle`);
}

// The UMD bundle sees CommonJS names; `global.Buffer` backs $base64encode/$base64decode.
const wrapped = '// jsonata ' + version + ' made synchronous by make_sync.js (generated).\n' +
    'var __qbJsonata = (function (global) {\n' +
    'var module = {exports: {}};\nvar exports = module.exports;\n' + source +
    '\nreturn module.exports;\n})(__qbGlobalShim);\n';
const driver = fs.readFileSync(driverPath, 'utf8');

// Smoke test under Node with Promise removed: evaluation must return plain values.
const sandbox = {};
vm.createContext(sandbox);
vm.runInContext('delete globalThis.Promise;', sandbox);
vm.runInContext(driver, sandbox, {filename: 'driver.js'});
vm.runInContext(wrapped, sandbox, {filename: 'jsonata-sync.js'});
const smoke = [
  ['$sum(a)', '{"a":[1,2,3]}', '6'],
  ['[a.$string($)]', '{"a":[1,2]}', '["1","2"]'],
  ['{"k": a[$ > 1]}', '{"a":[1,2,3]}', '{"k":[2,3]}'],
  ['$map(a, function($v){$v*2})', '{"a":[1,2]}', '[2,4]'],
  ['$sort(a, function($x,$y){$x<$y})', '{"a":[1,3,2]}', '[3,2,1]'],
  ['a^(>$)', '{"a":[1,3,2]}', '[3,2,1]'],
  ['$base64encode("hi")', 'null', '"aGk="'],
];
for (const [expr, input, expected] of smoke) {
  let got;
  try {
    sandbox.__qbSmoke = {expr, input};
    got = vm.runInContext(
        'JSON.stringify(__qbJsonata(__qbSmoke.expr).evaluate(JSON.parse(__qbSmoke.input)))',
        sandbox);
  } catch (err) {
    fail(`smoke '${expr}' threw: ${err && (err.message || err.code || err)}`);
  }
  if (got !== expected) fail(`smoke '${expr}' gave ${got}, expected ${expected}`);
}

// The C++ side: the text in chunks (each literal < 64 KiB, which -Wpedantic requires).
const delimiter = 'qbjs';
function chunks(text) {
  if (text.includes(`)${delimiter}"`)) fail('the raw string delimiter occurs in the script');
  const out = [];
  const size = 60000;
  for (let at = 0; at < text.length;) {
    let end = Math.min(at + size, text.length);
    // Do not split a UTF-16 surrogate pair.
    if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1])) end--;
    out.push(`    R"${delimiter}(${text.slice(at, end)})${delimiter}"`);
    at = end;
  }
  return out.join(',\n');
}
const cc = `// Generated by src/transform/tools/make_sync.js from jsonata ${version}. Do not edit.
// jsonata is MIT-licensed (Copyright IBM Corp. 2016, 2018); see its LICENSE in the npm package.
#include <string_view>
#include <vector>

namespace queuebox::transform::internal {

const std::vector<std::string_view>& JsonataBundleChunks() {
  static const std::vector<std::string_view> kChunks = {
${chunks(wrapped)}};
  return kChunks;
}

const std::vector<std::string_view>& DriverChunks() {
  static const std::vector<std::string_view> kChunks = {
${chunks(driver)}};
  return kChunks;
}

}  // namespace queuebox::transform::internal
`;
fs.writeFileSync(outJs, wrapped);
fs.writeFileSync(outCc, cc);
process.stdout.write(`make_sync: jsonata ${version}: ${promiseAll} Promise.all, ${asyncFns} async, ` +
    `${awaits} await, ${hooks} hook lookups removed, 4 allocation rewrites; ${smoke.length} smoke ` +
    `evaluations passed\n`);
