-- complete.sql: marks a claimed row processed (PostgreSQL). Run it in the same transaction as the
-- handler's business writes, then commit both.
--   :id, :token  the row and the claim_token its claim returned
-- Fenced: exactly one row while the claim is still this caller's. Zero rows: the claim is lost;
-- roll back the whole transaction (the business writes too) and never retry with another token.
UPDATE inbox
   SET state = 'processed', processed_at = clock_timestamp(),
       claim_token = NULL, lease_expires_at = NULL
 WHERE id = :id AND consumption = 'pull' AND state = 'processing'
   AND claim_token = :token AND lease_expires_at > clock_timestamp();
