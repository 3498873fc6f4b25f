-- Wallet orders and passes (CONTRACT §7). Order-type and pass-type signing identities live with the
-- other merchant keys (sealed the same way, listed and retired the same way), with their type
-- identifier and Apple's WWDR intermediate that a package signature must carry.
ALTER TABLE merchant_keys DROP CONSTRAINT merchant_keys_kind_check;
ALTER TABLE merchant_keys ADD CONSTRAINT merchant_keys_kind_check
    CHECK (kind IN ('processing', 'identity', 'order-type', 'pass-type'));
ALTER TABLE merchant_keys
    ADD COLUMN type_identifier text CHECK (type_identifier ~ '^[A-Za-z0-9.-]{1,128}$'),
    ADD COLUMN wwdr_pem        text,
    ADD CONSTRAINT merchant_keys_wallet_fields
        CHECK ((kind IN ('order-type', 'pass-type')) = (type_identifier IS NOT NULL AND wwdr_pem IS NOT NULL));
-- A type identifier belongs to one Apple team: one active identity signs for it.
CREATE UNIQUE INDEX merchant_keys_active_type ON merchant_keys (type_identifier) WHERE status = 'active';

-- Where a shopper manages an order (order.json `orderManagementURL`); unset: https://{first domain}/.
ALTER TABLE merchants ADD COLUMN order_management_url text CHECK (order_management_url ~ '^https://');

-- One Wallet order per succeeded payment. `document` is order.json as served (Tender re-signs it on
-- every GET); `modified_seq` orders changes for the "changed since" tags, `updated_at` is Last-Modified.
-- `authentication_token` must be stored readable: order.json carries it, and Wallet sends it back.
CREATE SEQUENCE wallet_modified_seq;
CREATE TABLE wallet_orders (
    order_type_identifier  text NOT NULL,
    order_identifier       text NOT NULL CHECK (order_identifier ~ '^ord_[a-z0-9]{24}$'),
    merchant_id            text NOT NULL REFERENCES merchants (merchant_id),
    payment_id             text NOT NULL UNIQUE REFERENCES payments (payment_id),
    authentication_token   text NOT NULL CHECK (length(authentication_token) >= 16),
    web_service_url        text NOT NULL,
    document               text NOT NULL CHECK (length(document) BETWEEN 2 AND 1048576),
    modified_seq           bigint NOT NULL DEFAULT nextval('wallet_modified_seq'),
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (order_type_identifier, order_identifier)
);

-- Passes a merchant issued: `pass` is the merchant's pass.json fields (Tender adds its own when
-- signing), `images` the files by name (base64), checked when issued.
CREATE TABLE wallet_passes (
    pass_type_identifier   text NOT NULL,
    serial_number          text NOT NULL CHECK (serial_number ~ '^[A-Za-z0-9._-]{1,64}$'),
    merchant_id            text NOT NULL REFERENCES merchants (merchant_id),
    payment_id             text REFERENCES payments (payment_id),
    authentication_token   text NOT NULL CHECK (length(authentication_token) >= 16),
    pass                   text NOT NULL CHECK (length(pass) BETWEEN 2 AND 1048576),
    images                 jsonb NOT NULL,
    modified_seq           bigint NOT NULL DEFAULT nextval('wallet_modified_seq'),
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (pass_type_identifier, serial_number)
);

-- Devices that asked Wallet to follow an order or a pass (Apple's web service "register").
CREATE TABLE wallet_registrations (
    kind               text NOT NULL CHECK (kind IN ('order', 'pass')),
    device_identifier  text NOT NULL CHECK (length(device_identifier) BETWEEN 1 AND 256),
    type_identifier    text NOT NULL,
    object_identifier  text NOT NULL,
    push_token         text NOT NULL CHECK (length(push_token) BETWEEN 1 AND 512),
    created_at         timestamptz NOT NULL,
    PRIMARY KEY (kind, device_identifier, type_identifier, object_identifier)
);
CREATE INDEX wallet_registrations_object ON wallet_registrations (kind, type_identifier, object_identifier);

-- APNs pushes owed for an update, written with the update (an outbox): sent by the push service with
-- retries; a 410 from APNs removes the registration.
CREATE TABLE wallet_pushes (
    push_id            bigserial PRIMARY KEY,
    kind               text NOT NULL CHECK (kind IN ('order', 'pass')),
    merchant_id        text NOT NULL REFERENCES merchants (merchant_id),
    type_identifier    text NOT NULL,
    device_identifier  text NOT NULL,
    object_identifier  text NOT NULL,
    push_token         text NOT NULL,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at    timestamptz NOT NULL,
    last_error         text,
    created_at         timestamptz NOT NULL
);
CREATE INDEX wallet_pushes_due ON wallet_pushes (next_attempt_at);
