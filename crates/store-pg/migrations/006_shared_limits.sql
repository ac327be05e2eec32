-- The windows of the profiles' shared limits (`[limits]`): per profile,
-- measure (money in millionths, tokens, requests) and UTC window (a
-- minute, hour or day, by its start), what answers spent and what
-- requests in flight reserved. A request reserves with one conditional
-- upsert (spent + reserved + its estimate <= the limit), so workers
-- reserving at once never pass it together; its answer settles.
CREATE TABLE pod_limit_windows (
    profile      text        NOT NULL,
    measure      text        NOT NULL CHECK (measure IN ('money', 'tokens', 'requests')),
    window_kind  text        NOT NULL CHECK (window_kind IN ('minute', 'hour', 'day')),
    window_start timestamptz NOT NULL,
    spent        bigint      NOT NULL DEFAULT 0,
    reserved     bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (profile, measure, window_kind, window_start)
);

-- A session parked because its profile's shared limit was reached (not on
-- a question): woken at its window's end (`wake_at`), or at once when a
-- worker starts (perhaps with the limit raised).
ALTER TABLE pod_sessions ADD COLUMN limited boolean NOT NULL DEFAULT false;
