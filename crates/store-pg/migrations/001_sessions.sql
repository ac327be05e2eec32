-- Sessions and their records. A session row is the lease: who runs it
-- (owner), until when (lease_until), and under which epoch; every append
-- is fenced on that epoch.
CREATE TABLE pod_sessions (
    id          uuid PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- queued: waiting for a fleet worker; running: someone holds (or held,
    -- if lease_until has passed) the lease; idle: nobody should pick it up.
    state       text NOT NULL CHECK (state IN ('queued', 'running', 'idle')),
    -- Handed to the fleet (`pod submit`): workers claim it when queued and
    -- when its lease expired mid-run. Other sessions are resumed by hand.
    fleet       boolean NOT NULL DEFAULT false,
    owner       text,
    epoch       bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    workspace   text NOT NULL
);

-- Queued sessions and expired leases, oldest first, for claims.
CREATE INDEX pod_sessions_claimable ON pod_sessions (state, created_at) WHERE fleet;

-- One row per log record; seq 0 is the header. The primary key makes a
-- duplicate append impossible. `record` keeps the JSON text as written
-- (json, not jsonb: key order and spacing are the log format's).
CREATE TABLE pod_records (
    session_id  uuid NOT NULL REFERENCES pod_sessions (id) ON DELETE CASCADE,
    seq         bigint NOT NULL,
    epoch       bigint NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    record      json NOT NULL,
    PRIMARY KEY (session_id, seq)
);
