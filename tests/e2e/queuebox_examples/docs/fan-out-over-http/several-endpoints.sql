BEGIN;

INSERT INTO outbox (topic, key, payload)
VALUES ('analytics.payment.succeeded', 'cust-42', '{"paymentId":"pay_1","amount":4200}'::jsonb);

INSERT INTO outbox (topic, key, payload)
VALUES ('audit.payment.succeeded', 'cust-42', '{"paymentId":"pay_1","amount":4200}'::jsonb);

COMMIT;
