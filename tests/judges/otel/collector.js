// A collector stand-in for the tracing tests: an OTLP/HTTP endpoint (POST /v1/traces, protobuf)
// that decodes each export with the OpenTelemetry project's own definitions
// (@opentelemetry/otlp-transformer's generated opentelemetry-proto root), not the relay's code,
// and appends one JSON line per span to --out. --status answers every export with that HTTP
// status (500: a failing collector); --delay-ms answers late (a slow collector). --decode off
// (benchmarks) answers 200 without decoding: the relay's cost of exporting, measured on two cores
// it shares with this process, without the stand-in's own decoding in it.
//
//   node collector.js --port-file <file> --out <file> [--status 200] [--delay-ms 0] [--decode on]
'use strict';
const fs = require('fs');
const http = require('http');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');

const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Response = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
const status = Number(args.status || 200);
const delayMs = Number(args['delay-ms'] || 0);
const decode = (args.decode || 'on') !== 'off';

const hex = (b) => (b && b.length ? Buffer.from(b).toString('hex') : '');
function value(v) {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  return null;
}
function attributes(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = value(kv.value || {});
  return out;
}

function record(body, headers) {
  const request = Request.toObject(Request.decode(body), { longs: String, defaults: false });
  const lines = [];
  for (const rs of request.resourceSpans || []) {
    const resource = attributes((rs.resource || {}).attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        lines.push(JSON.stringify({
          traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId),
          traceState: s.traceState || '', name: s.name, kind: s.kind || 0,
          start: s.startTimeUnixNano, end: s.endTimeUnixNano,
          attributes: attributes(s.attributes), status: (s.status || {}).code || 0,
          resource, scope: (ss.scope || {}).name || '', auth: headers['authorization'] || '',
        }));
      }
    }
  }
  if (lines.length) fs.appendFileSync(args.out, lines.join('\n') + '\n');
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const answer = () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' ||
          req.headers['content-type'] !== 'application/x-protobuf') {
        res.writeHead(415).end();
        return;
      }
      try {
        if (status === 200 && decode) record(Buffer.concat(chunks), req.headers);
      } catch (e) {
        fs.appendFileSync(args.out, JSON.stringify({ decodeError: String(e) }) + '\n');
        res.writeHead(400).end();
        return;
      }
      res.writeHead(status, { 'Content-Type': 'application/x-protobuf' });
      res.end(Buffer.from(Response.encode(Response.create()).finish()));
    };
    setTimeout(answer, delayMs);
  });
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(args['port-file'] + '.tmp', String(server.address().port));
  fs.renameSync(args['port-file'] + '.tmp', args['port-file']);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
