-- Balance leases: an instance's holds come out of a lease (one `holds` row per instance and
-- organization) that it refills here. The refill reserves at least p_need and up to p_want,
-- never more than an eighth of what the organization has free beyond p_need, under the guard
-- balance − held ≥ amount, in one transaction that locks the organization's row first (as the
-- end-of-call batch and the release of dead instances' leases do). When nothing can be reserved
-- it says what was free and what other instances' leases hold, so that the caller can ask them
-- to give back what they do not use.
CREATE FUNCTION modelgate_refill_lease(p_id TEXT, p_holder TEXT, p_org TEXT, p_need BIGINT, p_want BIGINT, p_now BIGINT,
  OUT added BIGINT, OUT free BIGINT, OUT elsewhere BIGINT) AS $$
BEGIN
  added := 0;
  elsewhere := 0;
  SELECT balance_nano - held_nano INTO free FROM organizations WHERE id = p_org FOR UPDATE;
  IF free IS NULL THEN
    free := 0;
    RETURN;
  END IF;
  IF p_need <= 0 OR free < p_need THEN
    SELECT coalesce(sum(amount_nano), 0) INTO elsewhere FROM holds WHERE org_id = p_org AND holder IS DISTINCT FROM p_holder;
    RETURN;
  END IF;
  added := GREATEST(p_need, LEAST(p_want, p_need + (free - p_need) / 8));
  UPDATE organizations SET held_nano = held_nano + added WHERE id = p_org;
  INSERT INTO holds (id, org_id, amount_nano, holder, created_at) VALUES (p_id, p_org, added, p_holder, p_now)
    ON CONFLICT (id) DO UPDATE SET amount_nano = holds.amount_nano + EXCLUDED.amount_nano, created_at = EXCLUDED.created_at;
END
$$ LANGUAGE plpgsql;
