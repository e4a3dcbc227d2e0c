"""The books: how each run and allocation stands (`recon status`'s rows) and what the
project's jobs spent (`recon cost`'s ledger), read from the journal's records, an
observation and a plan. Pure, like the planner it reads, and it decides nothing: what to
do next is the planner's (engine/plan), which never reads these books."""
