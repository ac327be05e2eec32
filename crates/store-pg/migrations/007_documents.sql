-- Small JSON documents front ends keep beside the sessions, by kind and
-- id: the Managed Agents API's agents (and their versions), environments
-- and sessions' settings, so every server of a fleet sees the same ones.
-- Written whole; the body is the JSON text the front end wrote.
CREATE TABLE pod_documents (
    kind       text        NOT NULL,
    id         text        NOT NULL,
    body       text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, id)
);
