-- The finance store (issue 6; finance-store.md §5): a double-entry ledger underneath, FinanceKit-shaped
-- views on top, and a transactional change log that history and monitoring read.

-- The change-log epoch: bumped by an operator after a logical restore (the xid counter is not carried
-- over), which invalidates every older history token (finance-store.md §5.5).
CREATE TABLE finance_epoch (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch      integer NOT NULL CHECK (epoch >= 1)
);
INSERT INTO finance_epoch (singleton, epoch) VALUES (true, 1);

-- General-ledger accounts, created on first use; `account_id` is the FinanceKit id of exposed ones.
CREATE TABLE finance_ledger_accounts (
    merchant_id       text NOT NULL REFERENCES merchants (merchant_id),
    account_key       text NOT NULL CHECK (length(account_key) BETWEEN 1 AND 300),
    ledger_class      text NOT NULL CHECK (ledger_class IN ('asset', 'liability', 'income', 'expense', 'equity')),
    currency_code     text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    exposed           boolean NOT NULL,
    account_id        uuid NOT NULL,
    display_name      text NOT NULL,
    institution_name  text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, account_key),
    CHECK (NOT exposed OR ledger_class IN ('asset', 'liability'))
);

-- One posting per business event, named by a key derived from the event ("payment:pay_1"), so
-- re-applying the event finds it; `fingerprint` is the event's content, to tell a replay from a conflict.
CREATE TABLE finance_postings (
    merchant_id                text NOT NULL REFERENCES merchants (merchant_id),
    posting_key                text NOT NULL CHECK (length(posting_key) BETWEEN 1 AND 300),
    transaction_type           text NOT NULL,
    transaction_date           timestamptz NOT NULL,
    status                     text NOT NULL CHECK (status IN ('authorized', 'pending', 'booked', 'memo', 'rejected')),
    posted_date                timestamptz,
    description                text NOT NULL,
    original_description       text NOT NULL,
    fingerprint                bytea NOT NULL CHECK (length(fingerprint) = 32),
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, posting_key)
);

-- The legs of a posting: positive amounts, each on one ledger account in that account's currency.
CREATE TABLE finance_entries (
    merchant_id    text NOT NULL,
    posting_key    text NOT NULL,
    leg            smallint NOT NULL CHECK (leg >= 0),
    account_key    text NOT NULL,
    side           text NOT NULL CHECK (side IN ('debit', 'credit')),
    amount_minor   bigint NOT NULL CHECK (amount_minor > 0),
    currency_code  text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    PRIMARY KEY (merchant_id, posting_key, leg),
    FOREIGN KEY (merchant_id, posting_key) REFERENCES finance_postings (merchant_id, posting_key),
    FOREIGN KEY (merchant_id, account_key) REFERENCES finance_ledger_accounts (merchant_id, account_key)
);
CREATE INDEX finance_entries_account ON finance_entries (merchant_id, account_key);

-- The double-entry invariant as the last line of defence (STYLE.md, Database): at COMMIT, every posting
-- touched in the transaction has Σ debits = Σ credits in every currency and at least two legs.
CREATE FUNCTION finance_check_posting_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    unbalanced text;
    legs integer;
BEGIN
    SELECT count(*) INTO legs FROM finance_entries
     WHERE merchant_id = NEW.merchant_id AND posting_key = NEW.posting_key;
    IF legs < 2 THEN
        RAISE EXCEPTION 'finance posting % has fewer than two legs', NEW.posting_key USING ERRCODE = '23514';
    END IF;
    SELECT currency_code INTO unbalanced FROM finance_entries
     WHERE merchant_id = NEW.merchant_id AND posting_key = NEW.posting_key
     GROUP BY currency_code
    HAVING sum(CASE side WHEN 'debit' THEN amount_minor ELSE -amount_minor END) <> 0
     LIMIT 1;
    IF unbalanced IS NOT NULL THEN
        RAISE EXCEPTION 'finance posting % is unbalanced in %', NEW.posting_key, unbalanced USING ERRCODE = '23514';
    END IF;
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER finance_entries_balanced
    AFTER INSERT ON finance_entries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION finance_check_posting_balanced();
-- A DELETE has no NEW row; deleting legs is never done by Tender, so refuse it outright.
CREATE FUNCTION finance_refuse_entry_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'finance entries are append-only' USING ERRCODE = '23514';
END;
$$;
CREATE TRIGGER finance_entries_append_only BEFORE DELETE OR UPDATE ON finance_entries
    FOR EACH ROW EXECUTE FUNCTION finance_refuse_entry_delete();

-- FinanceKit accounts (exposed ledger accounts); `display_name` in "C" collation so SQL orders names
-- as the core does (AccountQuery.sqlPlan).
CREATE TABLE finance_account (
    merchant_id    text NOT NULL REFERENCES merchants (merchant_id),
    id             uuid NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('asset', 'liability')),
    currency_code  text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    display_name   text COLLATE "C" NOT NULL,
    payload        jsonb NOT NULL,
    PRIMARY KEY (merchant_id, id)
);

-- Running balance of each FinanceKit account, updated in the transaction of every change to one of
-- its transactions (the row lock serialises writers per account, so the sums stay exact).
CREATE TABLE finance_balance (
    merchant_id      text NOT NULL,
    account_id       uuid NOT NULL,
    currency_code    text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    booked_minor     bigint NOT NULL,
    available_minor  bigint NOT NULL,
    PRIMARY KEY (merchant_id, account_id),
    FOREIGN KEY (merchant_id, account_id) REFERENCES finance_account (merchant_id, id)
);

-- FinanceKit transactions: current state, with the columns TransactionQuery.sqlPlan filters and sorts on.
CREATE TABLE finance_transaction (
    merchant_id             text NOT NULL,
    id                      uuid NOT NULL,
    account_id              uuid NOT NULL,
    posting_key             text NOT NULL,
    status                  text NOT NULL,
    transaction_type        text NOT NULL,
    credit_debit_indicator  text NOT NULL CHECK (credit_debit_indicator IN ('credit', 'debit')),
    merchant_category_code  smallint,
    transaction_date        timestamptz NOT NULL,
    posted_date             timestamptz,
    amount_minor            bigint NOT NULL CHECK (amount_minor > 0),
    currency_code           text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    payload                 jsonb NOT NULL,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, posting_key) REFERENCES finance_postings (merchant_id, posting_key),
    FOREIGN KEY (merchant_id, account_id) REFERENCES finance_account (merchant_id, id)
);
CREATE INDEX finance_transaction_date ON finance_transaction (merchant_id, transaction_date DESC, id);
CREATE INDEX finance_transaction_account ON finance_transaction (merchant_id, account_id, transaction_date DESC, id);
CREATE INDEX finance_transaction_posting ON finance_transaction (merchant_id, posting_key);

-- Current FinanceKit JSON of every entity per history scope (ChangeFeedSQL): accounts (scope_id = the nil
-- UUID, so the feed's scope condition is a plain equality the index serves), and each account's balances
-- and transactions (scope_id = account id).
CREATE TABLE finance_entity (
    merchant_id  text NOT NULL,
    scope_kind   text NOT NULL CHECK (scope_kind IN ('accounts', 'account_balances', 'transactions')),
    scope_id     uuid NOT NULL,
    entity_id    uuid NOT NULL,
    payload      jsonb NOT NULL,
    PRIMARY KEY (merchant_id, scope_kind, entity_id),
    CHECK ((scope_kind = 'accounts') = (scope_id = '00000000-0000-0000-0000-000000000000'))
);

-- The change log: one row per change, written in the domain change's transaction (transactional
-- outbox). Readers page by (xid, seq) below pg_snapshot_xmin (reliability-security.md §4.2 fix 1).
CREATE TABLE finance_change (
    merchant_id  text NOT NULL,
    scope_kind   text NOT NULL CHECK (scope_kind IN ('accounts', 'account_balances', 'transactions')),
    scope_id     uuid NOT NULL,
    epoch        integer NOT NULL,
    xid          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    op           text NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
    entity_id    uuid NOT NULL,
    written_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (seq)
);
CREATE INDEX finance_change_feed ON finance_change (merchant_id, scope_kind, scope_id, epoch, xid, seq);
