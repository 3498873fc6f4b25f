-- Settlement effects at 20,000 lines/s (issue 15 item 5): the long text keys of settlement_effects compare
-- byte-wise ("C") instead of through the database's default collation.
--
-- Every chunk records two settlement_effects rows per payment line, each an index insertion under a key of
-- 60-100 bytes ("recon|kind|" + the line's identity) after a lookup of it, and the batch index holds the
-- batch id of every live effect. Under the default collation (C.UTF-8 here) each B-tree comparison goes
-- through strcoll with its locale lookup and string copies; under "C" it is one memcmp. Inserting a chunk's
-- 2,000 rows measured 56-94 ms (median 76) against 47-85 ms (median 57) with these columns in "C".
--
-- Only equality and uniqueness are asked of these columns: no statement orders by them except
-- RecordedLedgerSource's tie-break between two bookings of one payment in one transaction, and under
-- C.UTF-8 (code point order, which for UTF-8 is byte order) even that order is unchanged. The rows are
-- rewritten with the same values, so every effect applied before stays applied (exactly once across the
-- upgrade: a re-import finds its keys recorded).
ALTER TABLE settlement_effects
    ALTER COLUMN effect_key TYPE text COLLATE "C",
    ALTER COLUMN batch_id TYPE text COLLATE "C";
