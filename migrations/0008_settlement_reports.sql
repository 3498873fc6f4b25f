-- Settlement reports imported from processors and what reconciling them found (CONTRACT §3,
-- finance-store.md §4). A file is identified by (merchant, format, SHA-256 of its bytes): the same
-- bytes again return the stored report and apply nothing.
CREATE TABLE settlement_reports (
    report_id      text PRIMARY KEY CHECK (report_id ~ '^sr_[a-z0-9]{24}$'),
    merchant_id    text NOT NULL REFERENCES merchants (merchant_id),
    format         text NOT NULL CHECK (format IN ('generic', 'adyen-sdr')),
    file_sha256    text NOT NULL CHECK (file_sha256 ~ '^[0-9a-f]{64}$'),
    line_count     integer NOT NULL CHECK (line_count >= 0),
    revision       integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
    supersedes     text REFERENCES settlement_reports (report_id),
    summary        jsonb NOT NULL,
    revision_diff  jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (merchant_id, format, file_sha256)
);
CREATE INDEX settlement_reports_merchant ON settlement_reports (merchant_id, created_at);

-- One row per finding, in report order. `line` keeps the parsed settlement line so that a later
-- revision of its batch can be compared with it (RevisionDiff). Items and effects are written in
-- bulk (a million per file) by the same transaction that inserts their report, so they carry no
-- foreign keys: a per-row FK trigger cost more than the insert itself.
CREATE TABLE settlement_report_items (
    report_id    text NOT NULL,
    ordinal      integer NOT NULL CHECK (ordinal >= 1),
    category     text NOT NULL,
    line_number  integer,
    batch_id     text,
    item         jsonb NOT NULL,
    line         jsonb,
    PRIMARY KEY (report_id, ordinal)
);
CREATE INDEX settlement_report_items_category ON settlement_report_items (report_id, category, ordinal);
CREATE INDEX settlement_report_items_batch ON settlement_report_items (report_id, batch_id) WHERE line IS NOT NULL;

-- The current revision of each batch: content_sha256 digests the batch's lines, so the same batch
-- id arriving with other content is a conflict unless the import explicitly supersedes it.
CREATE TABLE settlement_batches (
    merchant_id     text NOT NULL REFERENCES merchants (merchant_id),
    format          text NOT NULL,
    batch_id        text NOT NULL,
    report_id       text NOT NULL REFERENCES settlement_reports (report_id),
    content_sha256  text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
    revision        integer NOT NULL CHECK (revision >= 1),
    PRIMARY KEY (merchant_id, format, batch_id)
);

-- Finance-store effects already applied: the key is derived from the settlement line alone
-- (finance-store.md §4.5 point 5), so re-importing or superseding never applies one twice.
-- Keys are scoped by merchant because two merchants' processors may reuse batch ids.
CREATE TABLE settlement_effects (
    merchant_id  text NOT NULL,
    effect_key   text NOT NULL,
    report_id    text NOT NULL,
    kind         text NOT NULL,
    subject_id   text,
    amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
    currency_code text NOT NULL,
    credit_debit_indicator text NOT NULL CHECK (credit_debit_indicator IN ('credit', 'debit')),
    applied_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, effect_key)
);
-- subject_id is the payment or refund a book_* effect booked: later reports see it as booked.
CREATE INDEX settlement_effects_booked ON settlement_effects (merchant_id, subject_id)
    WHERE kind IN ('book_payment', 'book_refund');
