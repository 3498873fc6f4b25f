-- Domain events (CONTRACT §6): every business outcome, written in the same transaction as the change it
-- reports (an outbox: no event for a rolled-back change, no change without its event). `body` is the
-- event JSON exactly as `GET /v1/events/{id}` returns it and as webhooks deliver it (signatures are over
-- these bytes, so they are stored as text, never re-encoded).
CREATE TABLE events (
    seq          bigserial PRIMARY KEY,
    event_id     text NOT NULL UNIQUE CHECK (event_id ~ '^evt_[a-z0-9]{24}$'),
    merchant_id  text NOT NULL REFERENCES merchants (merchant_id),
    event_type   text NOT NULL CHECK (event_type ~ '^[a-z_]+\.[a-z_]+$'),
    object_id    text NOT NULL CHECK (length(object_id) BETWEEN 1 AND 128),
    created_at   timestamptz NOT NULL,
    body         text NOT NULL CHECK (length(body) BETWEEN 2 AND 1048576)
);
-- Newest first per merchant, optionally of one type (the list's two shapes).
CREATE INDEX events_merchant_seq ON events (merchant_id, seq DESC);
CREATE INDEX events_merchant_type_seq ON events (merchant_id, event_type, seq DESC);
CREATE INDEX events_object ON events (merchant_id, object_id);
