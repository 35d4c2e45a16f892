-- dead.sql: moves a claimed row to the dead letter (SQLite); as ../postgresql/dead.sql.
-- :id, :token, :error (sanitized). Zero rows: the claim is lost and nothing changes.
UPDATE inbox
   SET state = 'dead', last_error = :error,
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
