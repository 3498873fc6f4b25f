-- Merchants and their API keys: the first tables every other part of Tender refers to.
CREATE TABLE merchants (
    merchant_id            text PRIMARY KEY CHECK (length(merchant_id) BETWEEN 1 AND 128),
    display_name           text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 64),
    domains                text[] NOT NULL,
    country_code           text NOT NULL CHECK (country_code ~ '^[A-Z]{2}$'),
    currencies             text[] NOT NULL CHECK (cardinality(currencies) >= 1),
    supported_networks     text[] NOT NULL,
    merchant_capabilities  text[] NOT NULL,
    finance_restricted     boolean NOT NULL DEFAULT false,
    created_at             timestamptz NOT NULL DEFAULT now()
);

-- A secret API key is "tk_<key_id>_<secret>"; only SHA-256(secret) is stored and compared in constant time.
CREATE TABLE api_keys (
    key_id         text PRIMARY KEY CHECK (key_id ~ '^[a-z0-9]{16}$'),
    merchant_id    text NOT NULL REFERENCES merchants (merchant_id),
    secret_sha256  bytea NOT NULL CHECK (length(secret_sha256) = 32),
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);
