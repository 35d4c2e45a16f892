SELECT pg_drop_replication_slot('queuebox_outbox');
