// Harness for bench/peer_bench.sh: drains an existing backlog of the npm package
// pg-transactional-outbox's outbox table through one of its two listeners, with a message handler
// that POSTs each message to the HTTP sink (nginx answering 204) over a keep-alive agent.
//
//   node drain.mjs sql polling|replication   # prints the package's own table (+ polling function
//                                             # and indexes) DDL, from its DatabaseSetup helpers
//   node drain.mjs polling|replication       # drains; prints one JSON line on stdout
//
// Environment (drain): PG_URL (postgresql://user@host:port/db), ROWS (backlog size), SINK_URL
// (http://127.0.0.1:port/path), HANDLER_POOL (pg pool size of the handler connections), BATCH,
// POLL_MS and LOCK_MS (polling), PUBLICATION and SLOT (replication), MAX_ATTEMPTS, SOCKETS
// (keep-alive sockets), TIMEOUT_S (give up after this many seconds).
//
// What is timed: from the database clock read just before the listener is initialized to the
// largest processed_at (the package writes clock_timestamp() when it marks a message done, in the
// same transaction as the handler), once the database reports every backlog row processed.
// Runs in the scratch folder the script installs the package into (it imports from there).
import http from 'node:http';
import pg from 'pg';
import {
  DatabaseSetup,
  createReplicationSegmentMutexConcurrencyController,
  initializePollingMessageListener,
  initializeReplicationMessageListener,
} from 'pg-transactional-outbox';

const mode = process.argv[2];
const env = (name, fallback) => process.env[name] ?? fallback;

if (mode === 'sql') {
  const kind = process.argv[3];
  const cfg = {
    outboxOrInbox: 'outbox', database: 'unused', schema: 'public', table: 'outbox',
    listenerRole: 'unused', nextMessagesName: 'next_outbox_messages',
  };
  let sql = DatabaseSetup.dropAndCreateTable(cfg) + '\n';
  if (kind === 'polling') {
    sql += DatabaseSetup.createPollingFunction(cfg) + DatabaseSetup.setupPollingIndexes(cfg);
  }
  process.stdout.write(sql);
  process.exit(0);
}
if (mode !== 'polling' && mode !== 'replication') {
  console.error('usage: node drain.mjs polling|replication | node drain.mjs sql polling|replication');
  process.exit(2);
}

const rows = Number(env('ROWS', '1000'));
const timeoutS = Number(env('TIMEOUT_S', '300'));
const url = new URL(env('PG_URL', ''));
const dbConfig = {
  host: url.hostname, port: Number(url.port || 5432), user: decodeURIComponent(url.username),
  password: url.password ? decodeURIComponent(url.password) : undefined,
  database: url.pathname.slice(1),
};
const handlerPool = Number(env('HANDLER_POOL', '20'));
const sink = new URL(env('SINK_URL', 'http://127.0.0.1:18181/'));
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(env('SOCKETS', '1000')) });

// The package logs per message; levels below warn cost nothing. Warnings and errors are counted
// by their text (the report shows the counts) and the first few are printed to stderr.
const quiet = () => {};
const warnings = {};
let printed = 0;
const counted = (level) => (...args) => {
  const text = args.filter((a) => typeof a === 'string').join(' ')
    .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>').replace(/LSN [0-9A-F/]+/g, 'LSN <lsn>');
  const err = args.find((a) => a instanceof Error);
  const key = `${level}: ${err ? `${err.message} | ` : ''}${text}`;
  warnings[key] = (warnings[key] ?? 0) + 1;
  if (printed++ < 5) process.stderr.write(`${key}\n`);
};
const logger = {
  fatal: counted('fatal'), error: counted('error'), warn: counted('warn'), info: quiet,
  debug: quiet, trace: quiet, silent: quiet, level: 'warn',
};

// The receiver call: the payload as body, the same headers our http destination sends.
const post = (message) => new Promise((resolve, reject) => {
  const body = JSON.stringify(message.payload);
  const req = http.request({
    agent, host: sink.hostname, port: sink.port, path: sink.pathname, method: 'POST',
    headers: {
      'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body),
      'X-Message-Id': message.id, 'X-Topic': message.messageType,
      'X-Message-Key': message.segment ?? message.aggregateId,
      'X-Attempt': String(message.startedAttempts ?? 1),
    },
  }, (res) => {
    res.resume();
    res.on('end', () => (res.statusCode < 300 ? resolve()
      : reject(new Error(`HTTP ${res.statusCode}`))));
  });
  req.setTimeout(30000, () => req.destroy(new Error('HTTP timeout')));
  req.on('error', reject);
  req.end(body);
});

let handlerCalls = 0;
const handler = {
  handle: async (message) => {
    await post(message);
    handlerCalls++;
  },
};

// Settings common to both listeners, as the README's outbox example and a throughput-minded user
// would set them: no max-attempts / poisonous-message bookkeeping (one transaction less per
// message on replication), no cleanup timer, generous handler timeout (the backlog queues in the
// process, behind the handler pool).
const baseSettings = {
  dbSchema: 'public', dbTable: 'outbox',
  enableMaxAttemptsProtection: false, enablePoisonousMessageProtection: false,
  messageProcessingTimeoutInMs: 60000, messageCleanupIntervalInMs: 0,
  // The default retry strategy gives up after maxAttempts (5) whatever the protection flags say;
  // a message that loses a row-lock race (see README) must not be abandoned in a drain.
  maxAttempts: Number(env('MAX_ATTEMPTS', '1000')),
};
const settings = mode === 'polling'
  ? {
    ...baseSettings, nextMessagesFunctionName: 'next_outbox_messages',
    nextMessagesBatchSize: Number(env('BATCH', '500')),
    nextMessagesLockInMs: Number(env('LOCK_MS', '5000')),
    nextMessagesPollingIntervalInMs: Number(env('POLL_MS', '10')),
  }
  : {
    ...baseSettings, dbPublication: env('PUBLICATION', 'qb_peer_pub'),
    dbReplicationSlot: env('SLOT', 'qb_peer_slot'),
  };
const config = {
  outboxOrInbox: 'outbox', dbListenerConfig: dbConfig,
  dbHandlerConfig: { ...dbConfig, max: handlerPool }, settings,
};

const probe = new pg.Client(dbConfig);
await probe.connect();
const epoch = async (sql) => Number((await probe.query(sql)).rows[0].e);
const startEpoch = await epoch('SELECT extract(epoch FROM clock_timestamp()) AS e');
const startWall = process.hrtime.bigint();

let shutdown;
if (mode === 'polling') {
  // batchSizeStrategy: the default one fetches 1 message per poll for the first BATCH polls
  // (poison protection); a constant strategy keeps BATCH messages in flight from the start.
  [shutdown] = initializePollingMessageListener(config, handler, logger, {
    batchSizeStrategy: () => Promise.resolve(settings.nextMessagesBatchSize),
  });
} else {
  // Per-key order like ours: one message in flight per segment (= key), keys in parallel.
  [shutdown] = initializeReplicationMessageListener(config, handler, logger, {
    concurrencyStrategy: createReplicationSegmentMutexConcurrencyController(),
  });
}

// Wait until the database says every row is processed: handler calls first (no query load while
// draining), then the table, polled with a deadline.
const deadline = Date.now() + timeoutS * 1000;
const tick = () => new Promise((r) => setTimeout(r, 50));
let status = { processed: 0, last: null };
while (Date.now() < deadline) {
  if (handlerCalls >= rows) {
    const r = (await probe.query(`SELECT count(*)::int AS processed,
        extract(epoch FROM max(processed_at)) AS last FROM outbox
        WHERE processed_at IS NOT NULL`)).rows[0];
    status = { processed: r.processed, last: r.last === null ? null : Number(r.last) };
    if (status.processed >= rows) break;
  }
  await tick();
}
if (status.processed < rows) {
  const r = (await probe.query(`SELECT count(*)::int AS n FROM outbox
      WHERE processed_at IS NOT NULL`)).rows[0];
  status = { processed: r.n, last: null };
}
const wallS = Number(process.hrtime.bigint() - startWall) / 1e9;
await shutdown();
agent.destroy();
await probe.end();

const complete = status.processed >= rows;
const seconds = complete ? status.last - startEpoch : null;
process.stdout.write(JSON.stringify({
  mode, rows, complete, processed: status.processed, handler_calls: handlerCalls,
  seconds: seconds === null ? null : Number(seconds.toFixed(3)),
  msg_per_s: complete ? Number((rows / seconds).toFixed(1)) : null,
  wall_until_confirmed_s: Number(wallS.toFixed(3)), warnings,
  settings: {
    ...settings, handler_pool_max: handlerPool, keepalive_max_sockets: agent.maxSockets,
    ...(mode === 'polling' ? { batchSizeStrategy: 'constant nextMessagesBatchSize' }
      : { concurrencyStrategy: 'createReplicationSegmentMutexConcurrencyController' }),
  },
}) + '\n');
process.exit(complete ? 0 : 1);
