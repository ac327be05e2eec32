-- Schedules (`pod schedule`): each fire time starts one session. A fire
-- moves `next_fire` on with a compare-and-set in the same transaction that
-- queues the session and records the fire, so any number of workers fire
-- each fire time once.
CREATE TABLE pod_schedules (
    name         text PRIMARY KEY,
    timing       jsonb NOT NULL,
    task         text NOT NULL,
    template     json NOT NULL,
    limits       json,
    overlap      text NOT NULL CHECK (overlap IN ('skip', 'allow')),
    paused       boolean NOT NULL DEFAULT false,
    next_fire    timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_fire    timestamptz,
    last_session uuid,
    fires        bigint NOT NULL DEFAULT 0,
    skipped      bigint NOT NULL DEFAULT 0,
    missed       bigint NOT NULL DEFAULT 0
);
CREATE INDEX pod_schedules_due ON pod_schedules (next_fire) WHERE NOT paused;

-- One row per fire time acted on: the session it started, or why none.
CREATE TABLE pod_schedule_fires (
    schedule  text NOT NULL REFERENCES pod_schedules (name) ON DELETE CASCADE,
    fire_at   timestamptz NOT NULL,
    session   uuid,
    outcome   text NOT NULL CHECK (outcome IN ('started', 'skipped')),
    fired_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, fire_at)
);
