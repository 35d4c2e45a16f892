-- complete.sql: marks a claimed row processed (SQLite), in the handler's transaction; as
-- ../postgresql/complete.sql. :id, :token. Zero rows: roll the whole transaction back.
UPDATE inbox
   SET state = 'processed', processed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
