-- Where a session comes from, kept with it (so a deleted parent cuts nothing): the issued key it
-- goes back to (`issuer`), and the sessions whose keys made it up its chain of forks (`lineage`,
-- ids separated by spaces, oldest first). A key's reach and its revocation are one lookup each.
-- Rows made before are filled in by walking the chains that are still whole.
ALTER TABLE session_owners ADD COLUMN issuer TEXT;
ALTER TABLE session_owners ADD COLUMN lineage TEXT NOT NULL DEFAULT '';

WITH RECURSIVE chain(session_id, issuer, lineage, depth) AS (
    SELECT session_id, substr(owner, 5), ''::text, 0 FROM session_owners WHERE owner LIKE 'key:%'
    UNION ALL
    SELECT o.session_id, NULL::text, substr(o.owner, 9), 0 FROM session_owners o
    WHERE o.owner LIKE 'session:%' AND NOT EXISTS (SELECT 1 FROM session_owners p WHERE p.session_id = substr(o.owner, 9))
    UNION ALL
    SELECT o.session_id, c.issuer, trim(c.lineage || ' ' || c.session_id), c.depth + 1
    FROM session_owners o JOIN chain c ON o.owner = 'session:' || c.session_id
    WHERE c.depth < 64
)
UPDATE session_owners s SET issuer = c.issuer, lineage = c.lineage
FROM chain c WHERE c.session_id = s.session_id;

CREATE INDEX session_owners_issuer ON session_owners (issuer);
