-- Checkout versions store their two documents as the JSON text Tender wrote (sorted keys), not jsonb.
-- Nothing queries inside `response`, and `checkout` only at payment time (one `::jsonb` there), while
-- every shipping, contact or coupon update parsed both into jsonb and compressed them with pglz: about
-- a tenth of PostgreSQL's CPU per update. lz4 compresses the same rows at a fraction of pglz's cost.
-- Existing rows keep their content (jsonb's own text form; readers parse either).
ALTER TABLE checkout_session_versions
    ALTER COLUMN checkout TYPE text USING checkout::text,
    ALTER COLUMN response TYPE text USING response::text;
ALTER TABLE checkout_session_versions
    ALTER COLUMN checkout SET COMPRESSION lz4,
    ALTER COLUMN response SET COMPRESSION lz4;
