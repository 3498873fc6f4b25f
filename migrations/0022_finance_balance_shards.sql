-- Balances without a hot row (issue 15, payments).
--
-- Until now every change to an account's transactions updated the account's one `finance_balance` row and
-- its one `finance_entity` row (the balance's FinanceKit JSON, which the balance reads and the history feed
-- serve), both in the writer's transaction: concurrent payments of one merchant queued on those two row
-- locks until each commit.
--
-- Now a balance is kept in up to 64 shard rows per account, and a writer adds its delta to the shard its
-- transaction id chooses (FinanceBatchSQL), so concurrent writers almost never meet on a row, and each
-- shard's row lock still serialises its own writers (the sum stays exact). The balance's JSON is no longer
-- stored: it is built from the shards' sum when read. What readers see keeps its name and shape:
--   * `finance_balance` is a view with the old columns and one row per account (the shards summed);
--   * `finance_entity` is a view with the old columns: the stored payloads of accounts and transactions
--     (table `finance_entity_stored`) and one computed row per balance, its payload the same JSON the
--     writer stored before (jsonb, so the text is the same), `asOfDate` the latest write to any shard.
-- The change log is unchanged: every balance change still appends its `finance_change` row.

ALTER TABLE finance_balance RENAME TO finance_balance_shard;
ALTER TABLE finance_balance_shard
    ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 63),
    ADD COLUMN balance_id uuid,
    ADD COLUMN minor_digits smallint CHECK (minor_digits BETWEEN 0 AND 4),
    ADD COLUMN as_of_seconds bigint;
ALTER TABLE finance_balance_shard DROP CONSTRAINT finance_balance_pkey;
ALTER TABLE finance_balance_shard ADD CONSTRAINT finance_balance_shard_pkey PRIMARY KEY (merchant_id, account_id, shard);

-- The existing balances become shard 0, their id, digits and date taken from the JSON stored for them.
UPDATE finance_balance_shard s
   SET balance_id = e.entity_id,
       minor_digits = length(split_part(e.payload #>> '{currentBalance,booked,amount,amount}', '.', 2)),
       as_of_seconds = extract(epoch FROM (e.payload #>> '{currentBalance,booked,asOfDate}')::timestamptz)::bigint
  FROM finance_entity e
 WHERE e.merchant_id = s.merchant_id AND e.scope_kind = 'account_balances' AND e.scope_id = s.account_id;
ALTER TABLE finance_balance_shard
    ALTER COLUMN balance_id SET NOT NULL,
    ALTER COLUMN minor_digits SET NOT NULL,
    ALTER COLUMN as_of_seconds SET NOT NULL,
    ALTER COLUMN shard DROP DEFAULT;

ALTER TABLE finance_entity RENAME TO finance_entity_stored;
DELETE FROM finance_entity_stored WHERE scope_kind = 'account_balances';
ALTER TABLE finance_entity_stored ADD CONSTRAINT finance_entity_stored_no_balances CHECK (scope_kind <> 'account_balances');

CREATE VIEW finance_balance AS
SELECT merchant_id, account_id, currency_code,
       sum(booked_minor)::bigint AS booked_minor, sum(available_minor)::bigint AS available_minor
  FROM finance_balance_shard
 GROUP BY merchant_id, account_id, currency_code;

-- The digits of a non-negative minor amount, zero-padded to at least one digit before the decimal point.
CREATE FUNCTION finance_pad_minor(magnitude numeric, digits smallint)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lpad(magnitude::text, greatest(length(magnitude::text), digits + 1), '0')
$$;

-- One side of a FinanceKit balance as FinanceBatchSQL.accountBalance wrote it: the magnitude with the
-- currency's digits, RFC 3339 in whole seconds, credit when the sum is >= 0.
CREATE FUNCTION finance_balance_side(total numeric, currency text, digits smallint, as_of_seconds bigint)
RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'amount', jsonb_build_object(
            'amount', CASE WHEN digits = 0 THEN abs(total)::text
                           ELSE left(finance_pad_minor(abs(total), digits), -digits) || '.'
                                || right(finance_pad_minor(abs(total), digits), digits) END,
            'currencyCode', currency),
        'asOfDate', to_char(to_timestamp(as_of_seconds) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        'creditDebitIndicator', CASE WHEN total >= 0 THEN 'credit' ELSE 'debit' END)
$$;

CREATE VIEW finance_entity AS
SELECT merchant_id, scope_kind, scope_id, entity_id, payload FROM finance_entity_stored
UNION ALL
SELECT b.merchant_id, 'account_balances'::text, b.account_id, b.balance_id,
       jsonb_build_object('id', b.balance_id, 'accountID', b.account_id, 'currentBalance', jsonb_build_object(
           'available', finance_balance_side(b.available, b.currency_code, b.minor_digits, b.as_of_seconds),
           'booked', finance_balance_side(b.booked, b.currency_code, b.minor_digits, b.as_of_seconds)))
  FROM (SELECT merchant_id, account_id, balance_id, currency_code, minor_digits, sum(booked_minor) AS booked,
               sum(available_minor) AS available, max(as_of_seconds) AS as_of_seconds
          FROM finance_balance_shard
         GROUP BY merchant_id, account_id, balance_id, currency_code, minor_digits) b;
