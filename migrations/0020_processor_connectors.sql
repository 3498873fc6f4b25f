-- Processor connectors (docs/processor-adyen.md). Some processors answer a refund with "received" and
-- settle it later by another channel: such a refund is accepted by the processor, not yet paid back. It
-- stays 'pending' with the processor's reference, is not re-sent, and processor_accepted_at says when
-- the processor took it. An outcome Tender could not record may now also be of that kind.
ALTER TABLE refunds ADD COLUMN processor_accepted_at timestamptz;
ALTER TABLE refunds ADD CONSTRAINT refunds_accepted_has_reference
    CHECK (processor_accepted_at IS NULL OR processor_reference IS NOT NULL);

ALTER TABLE refunds DROP CONSTRAINT refunds_unrecorded_outcome_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_unrecorded_outcome_check
    CHECK (unrecorded_outcome IN ('approved', 'declined', 'unknown', 'accepted'));
ALTER TABLE payments DROP CONSTRAINT payments_unrecorded_outcome_check;
ALTER TABLE payments ADD CONSTRAINT payments_unrecorded_outcome_check
    CHECK (unrecorded_outcome IN ('approved', 'declined', 'unknown', 'accepted'));
