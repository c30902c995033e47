-- strata:compatible-since 15
-- Placeholder on branch op-restore only: version 0028 is another helper's migration (issue 28).
-- Drop this file when merging; 0030 follows theirs.
SELECT 1;
