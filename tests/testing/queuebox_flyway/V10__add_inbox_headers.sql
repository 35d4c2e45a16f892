-- QueueBox V10 (PostgreSQL): the headers of inbox rows.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS headers JSONB NOT NULL DEFAULT '{}';
