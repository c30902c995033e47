-- strata:compatible-since 15
-- Node lists by org (issue 29, item 3): a watch of ?org=ORG must tell a node that moved out
-- of ORG (sent as DELETED) from one that changed elsewhere (not sent), as a selector watch
-- tells them apart with prev_labels. prev_org is the org the object's org reference (a
-- node's spec.org, resource.Kind.OrgMember) named before a MODIFIED change; NULL for other
-- changes, for kinds without an org reference, and for changes an older release wrote, which
-- a watch takes to have been in the org (as it takes unknown labels to have matched).
-- Additive: older releases neither read nor write it.
ALTER TABLE {{schema}}.changes ADD COLUMN prev_org text;
