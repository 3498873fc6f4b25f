-- Payments and refunds. Card data is never stored: only network, last four, expiry month/year and the
-- processor's reference (PCI DSS 3.3.1, 3.5.1). While a payment waits for the processor's answer the
-- Apple token is kept as Apple sent it, still encrypted to the merchant key (PCI DSS 3.3.2 note: keep
-- the encrypted token and re-decrypt, never the decrypted payload); it is erased once the outcome is known.
CREATE TABLE payments (
    payment_id            text PRIMARY KEY CHECK (payment_id ~ '^pay_[a-z0-9]{24}$'),
    merchant_id           text NOT NULL REFERENCES merchants (merchant_id),
    session_id            text NOT NULL REFERENCES checkout_sessions (session_id),
    status                text NOT NULL CHECK (status IN ('succeeded', 'declined', 'pending', 'failed')),
    recovery_point        text NOT NULL CHECK (recovery_point IN ('accepted', 'processor_called', 'outcome_recorded')),
    amount_minor          bigint NOT NULL CHECK (amount_minor >= 0),
    currency_code         text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    network               text CHECK (length(network) <= 32),
    last4                 text CHECK (last4 ~ '^[0-9]{4}$'),
    expiration_month      integer CHECK (expiration_month BETWEEN 1 AND 12),
    expiration_year       integer CHECK (expiration_year BETWEEN 2000 AND 2099),
    processor_reference   text CHECK (length(processor_reference) <= 128),
    decline_code          text CHECK (length(decline_code) <= 64),
    failure_code          text CHECK (length(failure_code) <= 64),
    token_error_code      text CHECK (length(token_error_code) <= 64),
    -- Apple's header.transactionId (hex): unique, so a token pays once (Apple step 5). Failed payments keep NULL.
    apple_transaction_id  text UNIQUE CHECK (length(apple_transaction_id) <= 256),
    processor_key         text NOT NULL,
    idempotency_key       text,
    encrypted_token       bytea,
    resolve_attempts      integer NOT NULL DEFAULT 0,
    next_resolve_at       timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'failed') = (failure_code IS NOT NULL)),
    CHECK ((status = 'declined') = (decline_code IS NOT NULL)),
    CHECK (status <> 'succeeded' OR processor_reference IS NOT NULL),
    CHECK (status = 'pending' OR encrypted_token IS NULL),
    CHECK (status = 'failed' OR apple_transaction_id IS NOT NULL)
);
-- A session is paid at most once, and at most one attempt is with the processor at a time: a second
-- concurrent attempt fails on this index instead of reaching the processor (rule 58).
CREATE UNIQUE INDEX payments_one_live_per_session ON payments (session_id) WHERE status IN ('pending', 'succeeded');
CREATE INDEX payments_merchant_created ON payments (merchant_id, created_at DESC, payment_id DESC);
CREATE INDEX payments_pending ON payments (next_resolve_at) WHERE status = 'pending';

CREATE TABLE refunds (
    refund_id             text PRIMARY KEY CHECK (refund_id ~ '^re_[a-z0-9]{24}$'),
    payment_id            text NOT NULL REFERENCES payments (payment_id),
    merchant_id           text NOT NULL REFERENCES merchants (merchant_id),
    status                text NOT NULL CHECK (status IN ('succeeded', 'declined', 'pending')),
    amount_minor          bigint NOT NULL CHECK (amount_minor > 0),
    currency_code         text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    processor_reference   text CHECK (length(processor_reference) <= 128),
    decline_code          text CHECK (length(decline_code) <= 64),
    processor_key         text NOT NULL,
    idempotency_key       text,
    resolve_attempts      integer NOT NULL DEFAULT 0,
    next_resolve_at       timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'declined') = (decline_code IS NOT NULL))
);
CREATE INDEX refunds_payment ON refunds (payment_id);
CREATE INDEX refunds_pending ON refunds (next_resolve_at) WHERE status = 'pending';

-- The built-in simulator's own memory, standing in for a processor's: one row per processor key, so a
-- key charges at most once however often it is sent, across restarts. `calls` counts deliveries.
CREATE TABLE simulator_authorizations (
    processor_key         text PRIMARY KEY,
    kind                  text NOT NULL CHECK (kind IN ('authorization', 'refund')),
    payment_id            text NOT NULL,
    amount_minor          bigint NOT NULL,
    currency_code         text NOT NULL,
    decision              text NOT NULL,
    decline_code          text,
    lost_answers          integer NOT NULL DEFAULT 0,
    processor_reference   text NOT NULL,
    calls                 integer NOT NULL DEFAULT 1,
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX simulator_authorizations_payment ON simulator_authorizations (payment_id);
