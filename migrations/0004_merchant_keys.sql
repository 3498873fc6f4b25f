-- Apple Pay keys per merchant: payment-processing keys (selected by a token's header.publicKeyHash,
-- several active at once for rotation) and the merchant-identity certificate + key used for merchant
-- validation. Private keys are sealed with the master key (AES-256-GCM); never stored in clear.
CREATE TABLE merchant_keys (
    key_id                 text PRIMARY KEY,
    merchant_id            text NOT NULL REFERENCES merchants (merchant_id),
    kind                   text NOT NULL CHECK (kind IN ('processing', 'identity')),
    -- base64 SHA-256 of the certificate's SubjectPublicKeyInfo (Apple's publicKeyHash); processing keys only.
    public_key_hash        text,
    certificate_pem        text NOT NULL,
    certificate_not_after  timestamptz NOT NULL,
    private_key_sealed     bytea NOT NULL,
    status                 text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
    created_at             timestamptz NOT NULL DEFAULT now(),
    retired_at             timestamptz,
    CHECK ((kind = 'processing') = (public_key_hash IS NOT NULL)),
    CHECK ((status = 'retired') = (retired_at IS NOT NULL))
);
CREATE UNIQUE INDEX merchant_keys_public_key_hash ON merchant_keys (public_key_hash) WHERE public_key_hash IS NOT NULL;
CREATE INDEX merchant_keys_merchant ON merchant_keys (merchant_id, kind, status);
