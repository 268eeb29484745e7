-- The state schema (fields, types, reducers, defaults) of each pack version sessions ran on, so a
-- session stored on a version whose files have since changed can be rebuilt and migrated.
CREATE TABLE pack_schemas (
    pack TEXT NOT NULL,
    version TEXT NOT NULL,
    schema TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (pack, version)
);
