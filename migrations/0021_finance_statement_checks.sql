-- The finance ledger's last line of defence, once per statement instead of once per leg (issue 15 item 4).
--
-- 0007 checked every posting a transaction touched at COMMIT with a deferred trigger fired per leg (two
-- queries per leg), and two foreign keys per leg (to its posting and to its ledger account), each a
-- separate lookup: measured on a 5,000-payment batch (10,000 legs), the deferred trigger cost 640 ms at
-- COMMIT and the two foreign keys 400 ms, against 310 ms for the inserts themselves.
--
-- Now one statement-level trigger reads the statement's new legs (a transition table) and checks, set-based:
--   * every posting the legs name exists (what the foreign key to finance_postings checked);
--   * every ledger account the legs name exists (the foreign key to finance_ledger_accounts);
--   * the legs of each posting in that statement number at least two and balance in every currency.
-- Legs are append-only (finance_entries_append_only), so a posting whose every statement added balanced
-- legs is balanced: the invariant now holds after every statement, not only at COMMIT, and a posting's legs
-- must arrive in one statement (FinanceRecorder writes a batch's legs in one INSERT). Postings and ledger
-- accounts are never deleted; deleting one is now refused outright, as deleting a leg already was, so no
-- leg can lose what it points at.
-- Kept: the legs' primary key (the exactly-once key of a leg), the CHECKs (per-row, no lookups), and the
-- postings' and accounts' foreign keys to merchants (one lookup per posting, not per leg).

DROP TRIGGER finance_entries_balanced ON finance_entries;
DROP FUNCTION finance_check_posting_balanced();
ALTER TABLE finance_entries DROP CONSTRAINT finance_entries_merchant_id_posting_key_fkey;
ALTER TABLE finance_entries DROP CONSTRAINT finance_entries_merchant_id_account_key_fkey;

CREATE FUNCTION finance_check_new_entries() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_key text;
    bad_currency text;
BEGIN
    SELECT n.posting_key INTO bad_key FROM new_entries n
     WHERE NOT EXISTS (SELECT 1 FROM finance_postings p
                        WHERE p.merchant_id = n.merchant_id AND p.posting_key = n.posting_key)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance entry names posting % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    SELECT n.account_key INTO bad_key FROM new_entries n
     WHERE NOT EXISTS (SELECT 1 FROM finance_ledger_accounts a
                        WHERE a.merchant_id = n.merchant_id AND a.account_key = n.account_key)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance entry names ledger account % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    SELECT n.posting_key INTO bad_key FROM new_entries n
     GROUP BY n.merchant_id, n.posting_key
    HAVING count(*) < 2
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance posting % has fewer than two legs', bad_key USING ERRCODE = '23514';
    END IF;
    SELECT n.posting_key, n.currency_code INTO bad_key, bad_currency FROM new_entries n
     GROUP BY n.merchant_id, n.posting_key, n.currency_code
    HAVING sum(CASE n.side WHEN 'debit' THEN n.amount_minor ELSE -n.amount_minor END) <> 0
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance posting % is unbalanced in %', bad_key, bad_currency USING ERRCODE = '23514';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER finance_entries_checked
    AFTER INSERT ON finance_entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION finance_check_new_entries();

-- What a leg points at stays: postings and ledger accounts are never deleted (their keys never change,
-- finance_entries' old foreign keys had made both impossible while a leg named them).
CREATE FUNCTION finance_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME USING ERRCODE = '23514';
END;
$$;
CREATE TRIGGER finance_postings_kept BEFORE DELETE ON finance_postings
    FOR EACH STATEMENT EXECUTE FUNCTION finance_refuse_delete();
CREATE TRIGGER finance_ledger_accounts_kept BEFORE DELETE ON finance_ledger_accounts
    FOR EACH STATEMENT EXECUTE FUNCTION finance_refuse_delete();
CREATE FUNCTION finance_refuse_posting_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.posting_key <> OLD.posting_key THEN
        RAISE EXCEPTION 'finance posting keys never change' USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER finance_postings_key_kept BEFORE UPDATE OF merchant_id, posting_key ON finance_postings
    FOR EACH ROW EXECUTE FUNCTION finance_refuse_posting_key_change();
CREATE FUNCTION finance_refuse_account_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.merchant_id <> OLD.merchant_id OR NEW.account_key <> OLD.account_key THEN
        RAISE EXCEPTION 'finance ledger account keys never change' USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER finance_ledger_accounts_key_kept BEFORE UPDATE OF merchant_id, account_key ON finance_ledger_accounts
    FOR EACH ROW EXECUTE FUNCTION finance_refuse_account_key_change();
