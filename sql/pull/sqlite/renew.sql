-- renew.sql: extends the lease of a claimed row (SQLite); as ../postgresql/renew.sql.
--   :id, :token, :lease_ms (milliseconds, > 0). Zero rows: the claim is lost.
UPDATE inbox
   SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now',
                                   printf('%+.3f seconds', :lease_ms / 1000.0))
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
