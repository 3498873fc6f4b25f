-- The commit-ordered finance feed (docs/finance-feed.md): the feed service reads `finance_change` inserts
-- through logical decoding, in commit order, and gives each one a position here. History pages and
-- tokens name positions, so a reader never waits for transactions of other merchants or databases.

-- What logical decoding publishes: inserts into the change log, nothing else.
CREATE PUBLICATION tender_finance_feed FOR TABLE finance_change WITH (publish = 'insert');

-- One row per change-log row, numbered in commit order by the single feed writer (it holds the slot,
-- and every write locks `finance_feed_cursor`). `change_seq` is unique: a change is fed once, whatever
-- is replayed after a crash or a slot re-creation.
CREATE TABLE finance_feed (
    position     bigint PRIMARY KEY CHECK (position >= 1),
    change_seq   bigint NOT NULL UNIQUE,
    merchant_id  text NOT NULL,
    scope_kind   text NOT NULL CHECK (scope_kind IN ('accounts', 'account_balances', 'transactions')),
    scope_id     uuid NOT NULL,
    epoch        integer NOT NULL,
    xid          xid8 NOT NULL,
    op           text NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
    entity_id    uuid NOT NULL,
    fed_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX finance_feed_scope ON finance_feed (merchant_id, scope_kind, scope_id, epoch, position);

-- The feed writer's durable progress: the next position to give, and the end of the last source
-- transaction fully fed (the slot's confirmed position follows it, never leads it).
CREATE TABLE finance_feed_cursor (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    next_position  bigint NOT NULL CHECK (next_position >= 1),
    applied_lsn    pg_lsn NOT NULL,
    slot_name      text
);
INSERT INTO finance_feed_cursor (singleton, next_position, applied_lsn) VALUES (true, 1, '0/0');
