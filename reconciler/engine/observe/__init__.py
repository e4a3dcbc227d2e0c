"""What a pass reads and how it judges what it read; never what it does.

The journal read once per pass (``journal``), the scheduler asked over the journal's
window while the specs load (``observation``), the array maps read back (``arrays``),
finished jobs judged (``endings``), the files on disk and the code versions the planner
compares (``files``), all gathered into the world the planner plans (``seen.see``:
engine/plan/world.World). Nothing here writes the journal, the run folders or the
cluster, and nothing imports engine/apply (a contract in pyproject.toml checks it):
`recon plan` and `recon status` read through here alone.
"""
