-- retry.sql: returns a claimed row to pending after a failure (SQLite); as
-- ../postgresql/retry.sql. :id, :token, :delay_ms (milliseconds, >= 0), :error (sanitized).
UPDATE inbox
   SET state = 'pending',
       scheduled_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now',
                               printf('%+.3f seconds', :delay_ms / 1000.0)),
       attempt = attempt + 1, last_error = :error,
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
