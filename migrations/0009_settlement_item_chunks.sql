-- Settlement report items stored in chunks (issue: reconciliation at 100,000 lines/s). A row per item
-- cost more than the matching itself on a million-line file; a chunk holds up to 1,000 items of one
-- category as JSON lines (one object per line: o = ordinal, c = category, n = line number, b = batch,
-- i = the item, l = the parsed settlement line), compressed with lz4.
--
-- Ordinals are dense (1..N in report order), so a page of the whole report is an ordinal range and a
-- page of one category is a chunk range. `effects_pending` marks the chunks whose finance-store effects
-- are still to be applied: the import stores the report in one transaction, then applies the effects
-- chunk by chunk, each in a transaction of its own that clears the flag (exactly once, resumable after
-- a crash).
CREATE TABLE settlement_item_chunks (
    report_id        text NOT NULL REFERENCES settlement_reports (report_id),
    category         text NOT NULL,
    chunk            integer NOT NULL CHECK (chunk >= 0),
    first_ordinal    integer NOT NULL CHECK (first_ordinal >= 1),
    last_ordinal     integer NOT NULL CHECK (last_ordinal >= first_ordinal),
    item_count       integer NOT NULL CHECK (item_count BETWEEN 1 AND 1000),
    items            text COMPRESSION lz4 NOT NULL,
    effects_pending  boolean NOT NULL,
    PRIMARY KEY (report_id, category, chunk)
);
CREATE INDEX settlement_item_chunks_ordinal ON settlement_item_chunks (report_id, first_ordinal);
CREATE INDEX settlement_item_chunks_pending ON settlement_item_chunks (report_id, first_ordinal)
    WHERE effects_pending;

-- Reports imported before: their items move into chunks (their effects were applied at import).
INSERT INTO settlement_item_chunks (report_id, category, chunk, first_ordinal, last_ordinal, item_count, items,
                                    effects_pending)
SELECT report_id, category, chunk, min(ordinal), max(ordinal), count(*),
       string_agg(jsonb_strip_nulls(jsonb_build_object('o', ordinal, 'c', category, 'n', line_number,
                                                       'b', batch_id, 'i', item, 'l', line))::text,
                  E'\n' ORDER BY ordinal),
       false
FROM (SELECT *, ((row_number() OVER (PARTITION BY report_id, category ORDER BY ordinal)) - 1) / 1000 AS chunk
      FROM settlement_report_items) AS numbered
GROUP BY report_id, category, chunk;

DROP TABLE settlement_report_items;
