-- Two more kinds of checkpoint: `break`, a turn held at a breakpoint (resuming it goes on from
-- there), and `edit`, the state set by hand.
ALTER TABLE checkpoints DROP CONSTRAINT IF EXISTS checkpoints_kind_check;
ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_kind_check
    CHECK (kind IN ('start', 'step', 'turn', 'break', 'edit'));
