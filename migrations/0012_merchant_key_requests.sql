-- Keys made by `tender keys csr` while Apple issues their certificate: the private key is sealed with
-- the master key exactly as in merchant_keys (same key_id, same associated data), so `tender keys
-- import --certificate apple.cer` can move it there unchanged once Apple's certificate arrives. The
-- certificate is matched to its key by the SHA-256 of the public key (SubjectPublicKeyInfo DER).
CREATE TABLE merchant_key_requests (
    key_id              text PRIMARY KEY,
    merchant_id         text NOT NULL REFERENCES merchants (merchant_id),
    kind                text NOT NULL CHECK (kind IN ('processing', 'identity')),
    -- base64 SHA-256 of the requested public key's SPKI DER (for processing keys, Apple's publicKeyHash).
    spki_sha256         text NOT NULL UNIQUE,
    private_key_sealed  bytea NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- Set when the certificate was imported and the key moved to merchant_keys.
    completed_at        timestamptz
);
CREATE INDEX merchant_key_requests_merchant ON merchant_key_requests (merchant_id, completed_at);
