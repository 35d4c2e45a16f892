-- QueueBox V1 (PostgreSQL): the outbox with its first columns.
CREATE TABLE IF NOT EXISTS outbox (
    id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    topic        VARCHAR(255) NOT NULL,
    key          VARCHAR(255),
    payload      JSONB NOT NULL,
    headers      JSONB NOT NULL DEFAULT '{}',
    state        VARCHAR(50) NOT NULL DEFAULT 'pending',
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at   TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at   TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE INDEX IF NOT EXISTS idx_outbox_pending_scheduled ON outbox (state, scheduled_at)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_outbox_topic ON outbox (topic);

COMMENT ON TABLE outbox IS 'Messages written by the application, delivered by QueueBox';
COMMENT ON COLUMN outbox.topic IS 'Routing topic';
COMMENT ON COLUMN outbox.key IS 'Ordering key (optional)';
COMMENT ON COLUMN outbox.state IS 'pending, processing, sent or dead';
