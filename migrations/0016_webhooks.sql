-- Signed webhooks (CONTRACT §6, docs/webhooks.md): a merchant's endpoints, one delivery per event ×
-- endpoint, and every attempt made.

-- Secrets are stored only sealed under the master key (AES-256-GCM, associated data = endpoint, merchant
-- and secret version), like the merchants' private keys. During a rotation the previous secret keeps
-- signing until `previous_secret_expires_at`.
CREATE TABLE webhook_endpoints (
    endpoint_id                text PRIMARY KEY CHECK (endpoint_id ~ '^we_[a-z0-9]{24}$'),
    merchant_id                text NOT NULL REFERENCES merchants (merchant_id),
    url                        text NOT NULL CHECK (length(url) BETWEEN 8 AND 2048),
    enabled_events             text[] NOT NULL CHECK (cardinality(enabled_events) BETWEEN 1 AND 32),
    description                text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    finance_frequency          text CHECK (finance_frequency IN ('hourly', 'daily', 'weekly')),
    status                     text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason            text CHECK (disabled_reason IN ('gone', 'retries_exhausted', 'merchant')),
    secret_version             integer NOT NULL CHECK (secret_version >= 1),
    secret_sealed              bytea NOT NULL,
    previous_secret_sealed     bytea,
    previous_secret_expires_at timestamptz,
    -- The finance doorbell's cursor: the last `finance_feed.position` a doorbell (or the endpoint's
    -- creation) accounted for, and when the last doorbell went out.
    finance_position           bigint NOT NULL DEFAULT 0,
    finance_notified_at        timestamptz,
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL,
    CHECK ((previous_secret_sealed IS NULL) = (previous_secret_expires_at IS NULL)),
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, created_at, endpoint_id);
CREATE INDEX webhook_endpoints_finance ON webhook_endpoints (merchant_id) WHERE finance_frequency IS NOT NULL;

-- One row per (event, endpoint): UNIQUE makes fan-out and redelivery idempotent. `attempts` counts every
-- claim and is the lease token: a worker records its result only while `attempts` is still what it
-- claimed. A claimed delivery's `next_attempt_at` is pushed past the lease, so a worker that dies
-- mid-delivery leaves it due again (at least once). `failures` indexes the retry schedule and restarts
-- when a disabled endpoint is enabled again.
CREATE TABLE webhook_deliveries (
    delivery_id      bigserial PRIMARY KEY,
    event_id         text NOT NULL REFERENCES events (event_id),
    endpoint_id      text NOT NULL REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
    merchant_id      text NOT NULL,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    failures         integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    next_attempt_at  timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    delivered_at     timestamptz,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, state);

-- Every attempt: when, the HTTP status or our error code, how long it took.
CREATE TABLE webhook_delivery_attempts (
    attempt_id        bigserial PRIMARY KEY,
    delivery_id       bigint NOT NULL REFERENCES webhook_deliveries (delivery_id) ON DELETE CASCADE,
    endpoint_id       text NOT NULL,
    event_id          text NOT NULL,
    attempt_number    integer NOT NULL CHECK (attempt_number >= 1),
    attempted_at      timestamptz NOT NULL,
    http_status       integer CHECK (http_status BETWEEN 100 AND 999),
    error_code        text CHECK (length(error_code) <= 64),
    duration_ms       integer NOT NULL CHECK (duration_ms >= 0),
    CHECK (http_status IS NOT NULL OR error_code IS NOT NULL)
);
CREATE INDEX webhook_delivery_attempts_endpoint ON webhook_delivery_attempts (endpoint_id, attempt_id DESC);

-- Fan-out, exactly once and crash-safe: the deliveries of an event are written by the transaction that
-- writes the event, so they commit together or not at all. Endpoints of every status get them (a disabled
-- endpoint's backlog is delivered when it is enabled again). The finance doorbell is per endpoint and is
-- written by the sender, never fanned out.
CREATE FUNCTION webhook_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_type <> 'finance.changes_available' THEN
        INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, next_attempt_at, created_at)
        SELECT NEW.event_id, w.endpoint_id, NEW.merchant_id, NEW.created_at, NEW.created_at
          FROM webhook_endpoints w
         WHERE w.merchant_id = NEW.merchant_id
           AND (NEW.event_type = ANY (w.enabled_events) OR '*' = ANY (w.enabled_events));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_webhook_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION webhook_fan_out();
