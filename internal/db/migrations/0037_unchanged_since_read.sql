-- strata:compatible-since 36
-- Writes from an unlocked read (issue 31, item 4). A label PATCH read the object under its
-- row lock (SELECT … FOR UPDATE) in a round trip of its own, then sent its writes with the
-- COMMIT. It may now start from the replica's in-memory copy of the object (the list index)
-- and admit it under the kind's schema revision the replica remembers, and send everything —
-- the kind's key, the stamp, the labels, the audit record and the COMMIT — in one round
-- trip. The stamp itself writes nothing when the row has moved on (the statements behind it
-- then write nothing either: resource/queries.sql, afterWrite). A registration of a new
-- revision since the replica remembered its revision must fail the transaction instead:
-- unchanged_since_read fails the statement that calls it, and with it the transaction, with
-- SQLSTATE ST409, which strata reads as "read again" (db.ErrStale) and answers by running the
-- write again under the row lock, after reading the current revision. Registrations are
-- rare; an error makes the driver prepare the pipeline's statements again, which is why the
-- frequent case does without one. A function, not an expression, because plain SQL has no
-- way to raise an error of its own.
--
-- A new function that older releases never call: the bound stays at 36.
CREATE FUNCTION {{schema}}.unchanged_since_read(unchanged boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF unchanged IS NOT TRUE THEN
		RAISE EXCEPTION 'what this write was computed from has changed since it was read'
			USING ERRCODE = 'ST409', HINT = 'read again (under the locks) and write again';
	END IF;
	RETURN true;
END;
$$;
