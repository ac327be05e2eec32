-- Sessions parked on a question to a person: released by every worker,
-- claimed again when the question is answered (`queued`) or when its
-- timeout comes (`wake_at`; NULL: it waits for an answer however long).
ALTER TABLE pod_sessions
    DROP CONSTRAINT pod_sessions_state_check,
    ADD CONSTRAINT pod_sessions_state_check
        CHECK (state IN ('queued', 'running', 'idle', 'parked')),
    ADD COLUMN wake_at timestamptz;
