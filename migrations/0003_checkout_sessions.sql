-- Checkout sessions: a cart turned into an Apple Pay payment request, versioned on every update.
CREATE TABLE checkout_sessions (
    session_id               text PRIMARY KEY CHECK (session_id ~ '^cs_[a-z0-9]{24}$'),
    merchant_id              text NOT NULL REFERENCES merchants (merchant_id),
    status                   text NOT NULL CHECK (status IN ('open', 'paid', 'expired', 'canceled')),
    version                  integer NOT NULL CHECK (version >= 1),
    currency_code            text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    -- The total of the latest version, in the currency's minor units; the amount a token must carry.
    total_minor              bigint NOT NULL CHECK (total_minor >= 0),
    expires_at               timestamptz NOT NULL,
    -- Only SHA-256 of the client secret is stored; it authorizes one shopper's browser for this session.
    client_secret_sha256     bytea NOT NULL CHECK (length(client_secret_sha256) = 32),
    -- paymentRequest.applicationData (padded base64) and SHA-256 hex of its decoded bytes, which an
    -- Apple Pay token's header.applicationData must equal (token binding).
    application_data         text NOT NULL,
    application_data_sha256  text NOT NULL CHECK (application_data_sha256 ~ '^[0-9a-f]{64}$'),
    metadata                 jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX checkout_sessions_merchant ON checkout_sessions (merchant_id, created_at DESC);

-- The exact request and totals shown at each version (the priced checkout state, and the response
-- the shopper's sheet received for the event that produced it).
CREATE TABLE checkout_session_versions (
    session_id      text NOT NULL REFERENCES checkout_sessions (session_id),
    version         integer NOT NULL CHECK (version >= 1),
    event           text NOT NULL CHECK (event IN ('created', 'shipping_method', 'shipping_contact', 'coupon_code', 'payment_method')),
    total_minor     bigint NOT NULL CHECK (total_minor >= 0),
    -- PricedCheckout as JSON: the inputs and the ApplePayPaymentRequest at this version.
    checkout        jsonb NOT NULL,
    -- SHA-256 of the event's request body and the update dictionary returned for it, so the same
    -- input on the same version gives the same output.
    input_sha256    bytea,
    response        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, version)
);

-- Coupons are merchant data.
CREATE TABLE coupons (
    merchant_id              text NOT NULL REFERENCES merchants (merchant_id),
    code                     text NOT NULL CHECK (length(code) BETWEEN 1 AND 64),
    kind                     text NOT NULL CHECK (kind IN ('percent', 'fixed')),
    percent_basis_points     integer CHECK (percent_basis_points BETWEEN 1 AND 10000),
    amount_minor             bigint CHECK (amount_minor > 0),
    currency_code            text CHECK (currency_code ~ '^[A-Z]{3}$'),
    expires_at               timestamptz,
    minimum_subtotal_minor   bigint CHECK (minimum_subtotal_minor >= 0),
    created_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, code),
    CHECK ((kind = 'percent') = (percent_basis_points IS NOT NULL)),
    CHECK ((kind = 'fixed') = (amount_minor IS NOT NULL AND currency_code IS NOT NULL))
);

-- Tax rates per country and optional region ('' = the whole country).
CREATE TABLE tax_rates (
    merchant_id         text NOT NULL REFERENCES merchants (merchant_id),
    country_code        text NOT NULL CHECK (country_code ~ '^[A-Z]{2}$'),
    region              text NOT NULL DEFAULT '' CHECK (length(region) <= 64),
    rate_basis_points   integer NOT NULL CHECK (rate_basis_points BETWEEN 0 AND 10000),
    shipping_taxable    boolean NOT NULL DEFAULT false,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, country_code, region)
);
