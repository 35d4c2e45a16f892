-- renew.sql: extends the lease of a claimed row (PostgreSQL). Run it every third of the lease
-- while the handler works, on a connection of its own (it must commit at once, not with the
-- handler's transaction).
--   :id, :token  the row and the claim_token its claim returned
--   :lease_ms    the new lease from now, in milliseconds, > 0
-- Fenced: it changes exactly one row while the claim is still this caller's (same token, lease
-- not yet expired on the database clock). Zero rows: the claim is lost; stop the work.
UPDATE inbox
   SET lease_expires_at = clock_timestamp() + :lease_ms * INTERVAL '1 millisecond'
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > clock_timestamp();
