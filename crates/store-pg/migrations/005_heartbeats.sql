-- Heartbeats: a schedule with a `session` continues that session at each
-- fire time (its message appended, the session queued) instead of starting
-- a new one; the fire records `continued`.
ALTER TABLE pod_schedules ADD COLUMN session uuid;
ALTER TABLE pod_schedule_fires
    DROP CONSTRAINT pod_schedule_fires_outcome_check,
    ADD CONSTRAINT pod_schedule_fires_outcome_check
        CHECK (outcome IN ('started', 'skipped', 'continued'));
