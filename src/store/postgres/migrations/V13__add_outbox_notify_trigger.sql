-- V13 (QueueBox C++ only): the LISTEN/NOTIFY wake-up (outbox.notify.enabled). After every INSERT
-- statement on outbox, one notification on channel 'queuebox_outbox' with an empty payload.
-- FOR EACH STATEMENT, so a multi-row insert is one notification (PostgreSQL also folds identical
-- notifications of one transaction).
-- The trigger is created DISABLED: a NOTIFY at commit costs producers throughput (a cluster-wide
-- lock; docs/operations.md has the measured cost), so only installations that turn the wake-up on
-- pay for it. The relay's listener enables it when outbox.notify.enabled is true; polling stays
-- the source of truth either way. Re-runnable.
CREATE OR REPLACE FUNCTION queuebox_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('queuebox_outbox', '');
  RETURN NULL;
END
$$;
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'queuebox_outbox_notify'
                 AND tgrelid = 'outbox'::regclass) THEN
    CREATE TRIGGER queuebox_outbox_notify AFTER INSERT ON outbox
        FOR EACH STATEMENT EXECUTE FUNCTION queuebox_outbox_notify();
    ALTER TABLE outbox DISABLE TRIGGER queuebox_outbox_notify;
  END IF;
END
$$;
