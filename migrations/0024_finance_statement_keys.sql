-- Settlement effects at 20,000 lines/s (issue 15 item 5): the finance store's per-row foreign keys on the
-- tables a settlement chunk writes in bulk become one statement-level check each, as 0021 did for legs.
--
-- Measured on a 1,000-line chunk (a payment line with a fee writes a posting and its transaction), the
-- foreign keys of finance_postings (to merchants) and finance_transaction (to its posting and to its
-- FinanceKit account) were about 30% of the finance write statement: each is a separate lookup, with a
-- FOR KEY SHARE row lock, per inserted row.
--
-- Now, per INSERT statement, over the statement's new rows (a transition table):
--   * every new posting's merchant exists (what finance_postings_merchant_id_fkey checked);
--   * every new FinanceKit transaction's posting and account exist (finance_transaction's two foreign keys).
-- Refusals keep the foreign keys' SQLSTATE, 23503.
--
-- The foreign keys' other half (what is pointed at cannot go away) holds without them: postings are never
-- deleted nor re-keyed (0021), and now neither are FinanceKit accounts; merchants are never deleted, and a
-- merchant with postings also has ledger accounts, whose foreign key to merchants is kept. A transaction's
-- posting and account never change (status changes rewrite status, dates and payload only): an UPDATE of
-- those columns is refused, so a check at INSERT is a check for the row's whole life.

ALTER TABLE finance_postings DROP CONSTRAINT finance_postings_merchant_id_fkey;
ALTER TABLE finance_transaction DROP CONSTRAINT finance_transaction_merchant_id_posting_key_fkey;
ALTER TABLE finance_transaction DROP CONSTRAINT finance_transaction_merchant_id_account_id_fkey;

CREATE FUNCTION finance_check_new_postings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_key text;
BEGIN
    SELECT n.merchant_id INTO bad_key FROM (SELECT DISTINCT merchant_id FROM new_postings) n
     WHERE NOT EXISTS (SELECT 1 FROM merchants m WHERE m.merchant_id = n.merchant_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance posting names merchant % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER finance_postings_checked
    AFTER INSERT ON finance_postings
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION finance_check_new_postings();

CREATE FUNCTION finance_check_new_transactions() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_key text;
BEGIN
    SELECT n.posting_key INTO bad_key FROM new_transactions n
     WHERE NOT EXISTS (SELECT 1 FROM finance_postings p
                        WHERE p.merchant_id = n.merchant_id AND p.posting_key = n.posting_key)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance transaction names posting % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    SELECT n.account_id::text INTO bad_key FROM (SELECT DISTINCT merchant_id, account_id FROM new_transactions) n
     WHERE NOT EXISTS (SELECT 1 FROM finance_account a WHERE a.merchant_id = n.merchant_id AND a.id = n.account_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance transaction names account % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER finance_transaction_checked
    AFTER INSERT ON finance_transaction
    REFERENCING NEW TABLE AS new_transactions
    FOR EACH STATEMENT EXECUTE FUNCTION finance_check_new_transactions();

-- What a transaction points at stays: FinanceKit accounts are never deleted nor re-keyed (0021's
-- finance_refuse_delete), and a transaction's posting and account never change.
CREATE TRIGGER finance_account_kept BEFORE DELETE ON finance_account
    FOR EACH STATEMENT EXECUTE FUNCTION finance_refuse_delete();
CREATE FUNCTION finance_refuse_reference_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% keys and references never change', TG_TABLE_NAME USING ERRCODE = '23514';
END;
$$;
CREATE TRIGGER finance_account_key_kept BEFORE UPDATE OF merchant_id, id ON finance_account
    FOR EACH ROW WHEN (NEW.merchant_id IS DISTINCT FROM OLD.merchant_id OR NEW.id IS DISTINCT FROM OLD.id)
    EXECUTE FUNCTION finance_refuse_reference_change();
CREATE TRIGGER finance_transaction_references_kept
    BEFORE UPDATE OF merchant_id, id, account_id, posting_key ON finance_transaction
    FOR EACH ROW WHEN (NEW.merchant_id IS DISTINCT FROM OLD.merchant_id OR NEW.id IS DISTINCT FROM OLD.id
                       OR NEW.account_id IS DISTINCT FROM OLD.account_id
                       OR NEW.posting_key IS DISTINCT FROM OLD.posting_key)
    EXECUTE FUNCTION finance_refuse_reference_change();

-- No reader looks legs up by ledger account (the recorder reads a posting's legs through the primary key,
-- 0021's check finds accounts through finance_ledger_accounts' own key): the index was two insertions per
-- posting for nothing.
DROP INDEX finance_entries_account;
