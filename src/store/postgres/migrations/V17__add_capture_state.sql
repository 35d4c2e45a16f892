-- V17: queuebox_capture_state, the registry of change capture (outbox.capture.*, QueueBox
-- reference §3.1 V7 and Appendix A): one row per capture identity with the state id that ties it
-- to the identity file of the state directory and a fingerprint of the capture settings (no
-- secrets). QueueBox creates this table in its V7; QueueBox C++'s V7 shipped as a placeholder and
-- an applied file never changes (its checksum is recorded), so the table comes here. IF NOT
-- EXISTS: a database that QueueBox migrated (adopted from its Flyway history) already has it, with
-- these columns. Only change capture reads and writes it.
CREATE TABLE IF NOT EXISTS queuebox_capture_state (
    identity_name      VARCHAR(63) PRIMARY KEY,
    state_id           VARCHAR(36) NOT NULL,
    config_fingerprint VARCHAR(64) NOT NULL
);
