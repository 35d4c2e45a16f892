CREATE PUBLICATION queuebox_outbox FOR TABLE outbox;
