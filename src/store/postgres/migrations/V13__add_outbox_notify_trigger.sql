-- V13 (QueueBox C++ only): the LISTEN/NOTIFY wake-up (outbox.notify.enabled). After every INSERT
-- statement on outbox, one notification on channel 'queuebox_outbox' with an empty payload.
-- FOR EACH STATEMENT, so a multi-row insert is one notification (PostgreSQL also folds identical
-- notifications of one transaction). The trigger always exists; the relay listens only when the
-- setting is on, and polling stays the source of truth. docs/operations.md has the producer-side
-- cost as measured. Re-runnable.
CREATE OR REPLACE FUNCTION queuebox_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('queuebox_outbox', '');
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS queuebox_outbox_notify ON outbox;
CREATE TRIGGER queuebox_outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION queuebox_outbox_notify();
