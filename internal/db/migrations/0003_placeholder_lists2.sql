-- strata:compatible-since 2
-- Placeholder on branch lists2 only: another branch adds the real 0003, and the runner
-- needs contiguous versions. Drop this file at merge (0004 is renumbered then).
SELECT 1;
