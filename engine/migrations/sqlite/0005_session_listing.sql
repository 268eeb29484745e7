-- Listing sessions newest first, of one pack or all, a page at a time.
CREATE INDEX sessions_listing ON sessions (created_at, id);
CREATE INDEX sessions_listing_by_pack ON sessions (pack, created_at, id);
