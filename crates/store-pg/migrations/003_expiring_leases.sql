-- A claim looks for running fleet sessions whose lease ran out. Without an
-- index on the lease it read every running session's row, from every
-- worker at every poll: 2.3 ms at 10,000 running on a fresh table, 12-15
-- ms as the table churned. With it a claim reads only the expired ones
-- (0.2 ms). The price: a renewal's update of lease_until is no longer a
-- HOT update, so each renewal also updates the indexes of every lease it
-- holds (once per third of the lease's life).
CREATE INDEX pod_sessions_expiring ON pod_sessions (lease_until)
    WHERE fleet AND state = 'running';
