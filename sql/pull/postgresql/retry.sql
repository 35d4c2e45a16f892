-- retry.sql: returns a claimed row to pending after a failure (PostgreSQL). Run it after the
-- handler's transaction rolled back. Later rows of the same aggregate may pass it meanwhile.
--   :id, :token  the row and the claim_token its claim returned
--   :delay_ms    how long from now before the row is due again, in milliseconds, >= 0
--   :error       the failure, already stripped of secrets and cut short
-- Fenced: exactly one row while the claim is still this caller's; zero rows: the claim is lost
-- and nothing changes. The only statement that increments attempt.
UPDATE inbox
   SET state = 'pending',
       scheduled_at = clock_timestamp() + :delay_ms * INTERVAL '1 millisecond',
       attempt = attempt + 1, last_error = :error,
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > clock_timestamp();
