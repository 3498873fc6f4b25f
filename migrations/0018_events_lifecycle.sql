-- The checkout-session expiry sweeper (docs/events.md): it picks open sessions whose expiry has passed,
-- oldest expiry first, in bounded batches. This partial index keeps that scan to the open sessions.
CREATE INDEX checkout_sessions_open_expiry ON checkout_sessions (expires_at) WHERE status = 'open';
