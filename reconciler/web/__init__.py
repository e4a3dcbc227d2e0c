"""`recon serve`: a read-only web view of a project's runs, plan and allocations.

``snapshot`` turns one look at the cluster (the read-only pipeline `recon status` uses)
into what the page shows; ``poller`` takes that look once per interval in one background
thread, however many browsers watch; ``files`` reads the few files a page may show (log
tails, manifests) and only inside the project's run and state directories; ``app`` is the
Starlette application: its routes, the token check and the page's own static files.
"""
