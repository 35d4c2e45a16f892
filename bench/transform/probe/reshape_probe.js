// Probe script for engine_probe (see run.sh): the benchmark's reshape (or EXPRESSION) through the
// driver, as the engine calls it, timed by CPU time one evaluation at a time.
// Prints: percentiles of all, collecting and not collecting evaluations (a minor collection
// counted by JSGC_MINOR_GC_NUMBER = 45); minor collections per 1,000; bytes allocated per
// evaluation (exact when the nursery is fixed: gc 31 N and gc 2 N); the CPU time between
// evaluations that did not collect but took SLOW_FACTOR x the median.
var SLOW_FACTOR = 1.6;
var slot = __d.compile(typeof EXPRESSION === 'string' ? EXPRESSION : RESHAPE, 100);
if (typeof slot !== 'number') throw new Error('compile: ' + slot);
function evaluateOnce() {
  var r = __d.evaluate(slot, PAYLOAD, BINDINGS, 1e9);
  if (r[0] !== 'R') throw new Error('evaluate: ' + r);
}
function at(sorted, q) { return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]; }
function summary(values) {
  var s = values.slice().sort(function (a, b) { return a - b; });
  if (s.length === 0) return 'n 0';
  return 'n ' + s.length + ' p50 ' + at(s, 0.5).toFixed(1) + ' p90 ' + at(s, 0.9).toFixed(1) +
      ' p99 ' + at(s, 0.99).toFixed(1) + ' p99.9 ' + at(s, 0.999).toFixed(1);
}
for (var w = 0; w < 3000; w++) evaluateOnce();
var N = 20000, all = [], collecting = [], other = [], starts = [];
var minor0 = gcparam(45), start = cpu();
for (var i = 0; i < N; i++) {
  var minor = gcparam(45), c0 = cpu();
  evaluateOnce();
  var us = cpu() - c0;
  all.push(us);
  if (gcparam(45) !== minor) collecting.push(us); else { other.push(us); starts.push(c0 - start); }
}
var minors = gcparam(45) - minor0, nursery = gcparam(34);
print('nursery ' + nursery + ' bytes (min ' + gcparam(31) + ', max ' + gcparam(2) + ')');
print('all          ' + summary(all));
print('collecting   ' + summary(collecting));
print('other        ' + summary(other));
print('minor collections per 1,000: ' + (minors * 1000 / N).toFixed(1) + '; ~KB allocated per ' +
      'evaluation: ' + (minors * nursery / 1024 / N).toFixed(1));
var median = at(other.slice().sort(function (a, b) { return a - b; }), 0.5), gaps = [], last = -1;
for (var k = 0; k < other.length; k++) {
  if (other[k] < SLOW_FACTOR * median) continue;
  if (last >= 0 && gaps.length < 30) gaps.push(((starts[k] - last) / 1000).toFixed(2));
  last = starts[k];
}
print('CPU ms between slow non-collecting evaluations: ' + gaps.join(' '));
