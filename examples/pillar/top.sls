# A file-based Salt pillar tree, as a master keeps it under /srv/pillar:
# `strata pillar import examples/pillar --org acme` turns it into pillar rows.
base:
  '*':
    - common
  'web*':
    - apache
