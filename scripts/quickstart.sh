#!/usr/bin/env bash
# The main job on the embedded SQLite default: builds queuebox, creates the outbox in
# ./quickstart-out/outbox.db, inserts example rows (the seed's order.created insert and a few
# more, several keys, one topic that no route takes), runs the relay until it is idle, then
# shows what the file destination received and the final state of every row.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
# The same configuration as scripts/test.sh, so the test command reuses this build.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_UNITY_BUILD="${QB_UNITY_BUILD:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target queuebox
QB="$BUILD_DIR/apps/queuebox/queuebox"
OUT=quickstart-out
rm -rf "$OUT" && mkdir -p "$OUT"
export QUEUEBOX_CONFIG_FILE=examples/quickstart.yml

echo "== 1. Create the outbox (queuebox migrate)"
"$QB" migrate

echo "== 2. The application writes rows (each insert is its own transaction)"
sqlite3 "$OUT/outbox.db" <<'SQL'
INSERT INTO outbox (topic, key, payload, headers, aggregate_type)
VALUES ('order.created', 'cust-42',
        '{"orderId":"11111111-1111-1111-1111-111111111111","amount":99.99}',
        '{"X-Tenant":"acme"}', 'order');
INSERT INTO outbox (topic, key, payload) VALUES ('order.paid', 'cust-42', '{"orderId":"11111111-1111-1111-1111-111111111111","paid":true}');
INSERT INTO outbox (topic, key, payload) VALUES ('order.shipped', 'cust-42', '{"orderId":"11111111-1111-1111-1111-111111111111","carrier":"dhl"}');
INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'cust-7', '{"orderId":"22222222-2222-2222-2222-222222222222","amount":12.5}');
INSERT INTO outbox (topic, key, payload) VALUES ('order.paid', 'cust-7', '{"orderId":"22222222-2222-2222-2222-222222222222","paid":true}');
INSERT INTO outbox (topic, payload) VALUES ('invoice.issued', '{"invoice":"INV-1001","total":112.49}');
INSERT INTO outbox (topic, payload) VALUES ('audit.login', '{"user":"ada"}');
SQL
sqlite3 -header -column "$OUT/outbox.db" "SELECT sequence, topic, key, state FROM outbox ORDER BY sequence"

echo "== 3. Run the relay until nothing is left to deliver (queuebox run --until-idle)"
"$QB" run --until-idle 2>"$OUT/relay.log" || { cat "$OUT/relay.log"; exit 1; }
echo "   (relay log: $OUT/relay.log)"

echo "== 4. What the destination received ($OUT/delivered.jsonl), in delivery order"
cat "$OUT/delivered.jsonl"

echo "== 5. Final row states"
sqlite3 -header -column "$OUT/outbox.db" \
  "SELECT sequence, topic, key, state, attempt, COALESCE(last_error, '') AS last_error FROM outbox ORDER BY sequence"
"$QB" status
