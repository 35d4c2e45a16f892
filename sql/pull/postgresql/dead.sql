-- dead.sql: moves a claimed row to the dead letter (PostgreSQL), once the application's retry
-- ceiling is reached or the failure is permanent. No claim takes a dead row again; an operator
-- replays it.
--   :id, :token  the row and the claim_token its claim returned
--   :error       the failure, already stripped of secrets and cut short
-- Fenced: exactly one row while the claim is still this caller's; zero rows: the claim is lost
-- and nothing changes.
UPDATE inbox
   SET state = 'dead', last_error = :error,
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > clock_timestamp();
