-- Settlement effects at 20,000 lines/s (issue 15 item 5): 0021's statement check of new legs looks each
-- posting and each ledger account up once, not once per leg.
--
-- A settlement chunk's finance write inserts about 2,000 legs naming 1,000 postings and two ledger
-- accounts; the check probed finance_postings' and finance_ledger_accounts' primary keys once per leg
-- (4,000 probes: 8-10 ms and 4-5 ms of the chunk's write statement). Over the distinct keys it does
-- 1,002. What it refuses, and with which SQLSTATE, is unchanged.
CREATE OR REPLACE FUNCTION finance_check_new_entries() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_key text;
    bad_currency text;
BEGIN
    SELECT n.posting_key INTO bad_key FROM (SELECT DISTINCT merchant_id, posting_key FROM new_entries) n
     WHERE NOT EXISTS (SELECT 1 FROM finance_postings p
                        WHERE p.merchant_id = n.merchant_id AND p.posting_key = n.posting_key)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'finance entry names posting % that does not exist', bad_key USING ERRCODE = '23503';
    END IF;
    SELECT n.account_key INTO bad_key FROM (SELECT DISTINCT merchant_id, account_key FROM new_entries) n
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
