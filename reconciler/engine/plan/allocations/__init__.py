"""Planning allocations: allocate, reuse, renew, set up, release; and where the runs
inside them start. Pure, like the rest of the planner; each concern has a module:

    judging    how an allocation's jobs stand: own health, stage, setup, steps, idle
    state      each allocation's jobs decided (reuse, set up, renew, release, prune) and
               what runs need to know of it in this plan (``AllocationState``)
    gpus       what GPU steps hold in a ready job (``InUse``), a run's ``GpuShare``, and
               whether that share is free now (``short_of``)
    placement  where a run starts (``place``), and the jobs made for runs that wait
               (``renewals``, ``on_demand``)

What they read (the observed jobs, the journal's records and setups, grouped by
allocation once per plan) is ``PlanInputs`` (engine/plan/inputs.py).
"""
