-- A processor outcome Tender cannot record (its effects do not fit: a finance balance would overflow, a
-- processor code breaks a column limit) must not be re-sent to the processor forever. Each failed
-- recording is counted and backs off; after TENDER_PAYMENTS_RECORD_ATTEMPTS_MAX failures the row waits
-- for an operator (needs_operator_at), the resolver leaves it alone, and GET shows it.
ALTER TABLE payments
    ADD COLUMN record_failures    integer NOT NULL DEFAULT 0 CHECK (record_failures >= 0),
    ADD COLUMN unrecorded_outcome text CHECK (unrecorded_outcome IN ('approved', 'declined', 'unknown')),
    ADD COLUMN needs_operator_at  timestamptz;

ALTER TABLE refunds
    ADD COLUMN record_failures    integer NOT NULL DEFAULT 0 CHECK (record_failures >= 0),
    ADD COLUMN unrecorded_outcome text CHECK (unrecorded_outcome IN ('approved', 'declined', 'unknown')),
    ADD COLUMN needs_operator_at  timestamptz;

-- What the metrics gauge counts on every resolver pass.
CREATE INDEX payments_needs_operator ON payments (needs_operator_at) WHERE needs_operator_at IS NOT NULL;
CREATE INDEX refunds_needs_operator ON refunds (needs_operator_at) WHERE needs_operator_at IS NOT NULL;
