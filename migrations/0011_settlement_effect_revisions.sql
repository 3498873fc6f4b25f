-- Superseded batches book once (issue 12): every applied settlement effect remembers the batch it
-- belongs to, what it booked and which finance-store postings carry it, so a corrected revision can
-- take back (reverse) what the old revision booked and book its own lines instead.
--
-- An effect's key no longer holds the amounts of an unreferenced line (SettlementLine.effectIdentity):
-- a corrected amount is the same key with other content, booked as version n+1 after the postings
-- of version n are reversed; a line the new revision no longer has is reversed when the report
-- finishes (`settlement_reports.finish_pending`).
ALTER TABLE settlement_effects
    ADD COLUMN format text,
    ADD COLUMN batch_id text,
    ADD COLUMN version integer NOT NULL DEFAULT 0 CHECK (version >= 0),
    ADD COLUMN posting_keys text[] NOT NULL DEFAULT '{}',
    ADD COLUMN reversed_by text,
    ADD COLUMN payout_confirmed boolean NOT NULL DEFAULT false;

-- Effects applied before: the batch comes from the key ("recon|kind|" + the line's natural key, whose
-- parts are joined by '|' with '%' and '|' escaped), the postings from the ids FinanceSettlementSink
-- derived from the key ("st" + the first 12 bytes of SHA-256(key) in hex).
UPDATE settlement_effects
   SET format = split_part(effect_key, '|', 3),
       batch_id = CASE split_part(effect_key, '|', 3)
           WHEN 'generic' THEN replace(replace(split_part(effect_key, '|', 4), '%7C', '|'), '%25', '%')
           WHEN 'adyen-sdr' THEN replace(replace(split_part(effect_key, '|', 4), '%7C', '|'), '%25', '%')
                || ':' || replace(replace(split_part(effect_key, '|', 5), '%7C', '|'), '%25', '%')
       END;

UPDATE settlement_effects AS e
   SET posting_keys = CASE
           WHEN e.kind = 'fee' THEN ARRAY['fee:' || s.id]
           WHEN e.kind = 'adjustment' THEN ARRAY['adjustment:' || s.id]
           WHEN e.kind = 'payout' THEN ARRAY['payout:' || s.id, 'payout-arrival:' || s.id]
           WHEN e.kind IN ('chargeback', 'chargeback_reversal') AND e.subject_id IS NULL THEN ARRAY['adjustment:' || s.id]
           WHEN e.kind = 'chargeback' THEN ARRAY['chargeback:cb'
               || encode(substring(sha256(convert_to('chargeback|' || e.subject_id, 'UTF8')) FROM 1 FOR 12), 'hex')]
           WHEN e.kind = 'chargeback_reversal' THEN ARRAY['chargeback-reversal:' || s.id]
           ELSE '{}'::text[]
       END
  FROM (SELECT merchant_id, effect_key,
               'st' || encode(substring(sha256(convert_to(effect_key, 'UTF8')) FROM 1 FOR 12), 'hex') AS id
          FROM settlement_effects) AS s
 WHERE s.merchant_id = e.merchant_id AND s.effect_key = e.effect_key;

-- The live effects of a batch (what a superseding revision compares itself with).
CREATE INDEX settlement_effects_batch ON settlement_effects (merchant_id, format, batch_id)
    WHERE reversed_by IS NULL;
-- Payouts whose deposit no later report has confirmed yet.
CREATE INDEX settlement_effects_unconfirmed_payouts ON settlement_effects (merchant_id, currency_code)
    WHERE kind = 'payout' AND NOT payout_confirmed AND reversed_by IS NULL;

-- A report's last step after its item chunks: reverse what the batches it supersedes booked and it no
-- longer has, and confirm earlier payouts; `finish_pending` is cleared in that step's transaction.
-- Reports stored before finished everything at import.
ALTER TABLE settlement_reports
    ADD COLUMN finish_pending boolean NOT NULL DEFAULT false,
    ADD COLUMN superseded_batches text[] NOT NULL DEFAULT '{}',
    ADD COLUMN effects_rebooked integer NOT NULL DEFAULT 0 CHECK (effects_rebooked >= 0),
    ADD COLUMN effects_reversed integer NOT NULL DEFAULT 0 CHECK (effects_reversed >= 0),
    ADD COLUMN payouts_confirmed integer NOT NULL DEFAULT 0 CHECK (payouts_confirmed >= 0);
CREATE INDEX settlement_reports_finish_pending ON settlement_reports (merchant_id, created_at)
    WHERE finish_pending;
