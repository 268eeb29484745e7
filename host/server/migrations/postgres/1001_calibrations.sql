-- Calibrations (`ruleweave calibrate`): how far a pack's stand-ins were from its models, kept by
-- the pack's version so that simulate and tune reports of that version carry their headline.
-- One per (pack, version): a later calibration replaces it.
CREATE TABLE calibrations (
    pack TEXT NOT NULL,
    version TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    -- The calibration as `calibrate --json` prints it.
    body TEXT NOT NULL,
    PRIMARY KEY (pack, version)
);
