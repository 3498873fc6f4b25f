-- Management without SQL: a coupon can be disabled (kept, refused at checkout) and an API key shows
-- when it was last used (kept to the minute, so authentication writes at most once a minute per key).
ALTER TABLE coupons ADD COLUMN disabled_at timestamptz;
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
