-- strata:compatible-since 15
-- Stand-in on branch state-encryption only: version 0025 belongs to the concurrent pillar
-- change (secret pillar categories), and migration versions must be contiguous, so this
-- branch carries an empty 0025 to run its own 0026. At the merge, take that change's file.
SELECT 1;
