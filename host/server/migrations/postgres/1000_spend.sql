-- What an issued key may spend on real models over all its jobs (`spend_limit_usd`, in the
-- currency of `[prices]`; NULL for no cap), and what its jobs have spent or hold while they run
-- (`spent_usd`). The server numbers its migrations from 1000 on, apart from the store's.
ALTER TABLE issued_keys ADD COLUMN spend_limit_usd DOUBLE PRECISION;
ALTER TABLE issued_keys ADD COLUMN spent_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
