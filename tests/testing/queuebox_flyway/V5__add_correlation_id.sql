-- QueueBox V5 (PostgreSQL): correlation id of inbox rows.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS correlation_id VARCHAR(128);
