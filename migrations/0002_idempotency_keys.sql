-- Idempotency keys (Idempotency-Key header), per merchant. A row is written in the same transaction
-- as the effect it guards, so a key is either absent (nothing happened) or bound to one request
-- fingerprint and, once finished, to the exact response to replay.
CREATE TABLE idempotency_keys (
    merchant_id          text NOT NULL REFERENCES merchants (merchant_id),
    idempotency_key      text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_fingerprint  bytea NOT NULL CHECK (length(request_fingerprint) = 32),
    recovery_point       text NOT NULL DEFAULT 'started',
    locked_until         timestamptz,
    resource_id          text,
    response_status      integer,
    response_body        bytea,
    created_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz,
    PRIMARY KEY (merchant_id, idempotency_key),
    CHECK ((response_status IS NULL) = (finished_at IS NULL))
);
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE finished_at IS NULL;
